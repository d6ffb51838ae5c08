"""Finding memories: the words (``search``: BM25 and the tokenizer), the meaning
(``embed``: the embedders; ``vectors``: cosines and fusion), both ranked over one or more
stores (``ranking``), a question's own period and weight (``asked``, ``periods``), and the
SQLite the indexes share (``cachedb``).
This package does NOT read or write memory files and does NOT decide what a model sees."""
