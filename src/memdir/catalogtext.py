"""BM25 over the catalogue alone (every memory's name and description, as parsed at open) for
a store whose full-text index is not built yet: what a first search answers with, at once,
while ``memdir index --background`` indexes the bodies of many never-seen files.

The terms are those of ``search.tokenize`` and the scoring is ``search``'s (column-weighted
presence, Lucene's IDF), over two columns. No memory is tokenised one by one: the names and
the descriptions are joined into two texts, only the words that could stem to a query's terms
are found and stemmed (once each), and one regular expression of those that do finds where
they occur. A memory's length is its count of words (stop words included, counted by the
spaces between them), close to what the index counts.
This module does NOT read memory files and does NOT decide when it is used (``lookup``).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import re
import unicodedata
from collections.abc import Iterable

from .search import STOP_WORDS, WEIGHTS, Stats, _ascii_stem, _is_cjk, bm25_of, query_terms, weigh


def _joined(texts: list[str]) -> tuple[str, list[int]]:
    """``texts`` normalised as ``tokenize`` does, joined by newlines, and where each starts."""
    text = "\n".join(texts)
    if text.isascii():
        text = text.lower()  # NFKC changes nothing here, and lower keeps every offset
    else:
        texts = [unicodedata.normalize("NFKC", t).lower() for t in texts]
        text = "\n".join(texts)
    starts = list(itertools.accumulate((len(t) + 1 for t in texts[:-1]), initial=0))
    return text, starts


class CatalogText:
    """The full-text side of a ranking (``ranking.FullText``) over names and descriptions."""

    candidates = 200

    def __init__(self, docs: Iterable[tuple[str, str, str]]) -> None:
        """``docs``: (key, name, description) of every memory."""
        rows = list(docs)
        self.keys = [key for key, _, _ in rows]
        self.names = [name.replace("-", " ") for _, name, _ in rows]
        self.descriptions = [desc for _, _, desc in rows]
        self.columns = [_joined(self.names), _joined(self.descriptions)]
        # words, counted by the spaces between them (the same count for one and for all)
        self.tokens = sum(text.count(" ") for text, _ in self.columns) + 2 * len(rows)
        self._lengths: dict[int, int] = {}
        self._heads: set[str] = set()  # word beginnings looked for so far
        self._forms: dict[str, str] = {}  # the words found with them -> their stems
        self._found: dict[str, dict[int, float]] = {}  # term -> document -> weight

    def _length(self, doc: int) -> int:
        n = self._lengths.get(doc)
        if n is None:
            n = self._lengths[doc] = (
                self.names[doc].count(" ") + self.descriptions[doc].count(" ") + 2
            )
        return n

    def _words_of(self, terms: list[str]) -> dict[str, str]:
        """The words of the catalogue whose stem is one of ``terms``: word -> term. Only
        words that could stem to a term are found and stemmed: stemming changes endings, so a
        stem begins with its word's first two letters (its first one, for dying -> die, and
        o'clock -> oclock)."""
        wanted = {t for t in terms if not _is_cjk(t[0])}
        heads = (
            {t[:2] for t in wanted} | {t[0] + "y" for t in wanted} | {t[0] + "'" for t in wanted}
        )
        new = heads - self._heads
        if new:
            self._heads |= new
            starts = "|".join(map(re.escape, sorted(new, key=len, reverse=True)))
            pattern = re.compile(f"(?:{starts})[^\\W_]*(?:'[^\\W_]+)?")
            for text, _ in self.columns:
                for w in set(pattern.findall(text)) - self._forms.keys():
                    if w not in STOP_WORDS:
                        self._forms[w] = _ascii_stem(w) if w.isascii() else w
        return {w: stem for w, stem in self._forms.items() if stem in wanted}

    def _find(self, terms: list[str]) -> None:
        """Where the terms not looked for yet occur: per document, their column weights."""
        terms = [t for t in terms if t not in self._found]
        if not terms:
            return
        for t in terms:
            self._found[t] = {}
        forms = self._words_of(terms)
        cjk = [t for t in terms if _is_cjk(t[0])]
        for weight, (text, starts) in zip(WEIGHTS[:2], self.columns, strict=True):
            seen: dict[str, set[int]] = {t: set() for t in terms}  # a term counts once a column
            if forms:
                alternatives = "|".join(map(re.escape, sorted(forms, key=len, reverse=True)))
                # the word's start is checked after: a pattern that begins with its words is
                # scanned for their first letters, several times faster than a look-behind
                pattern = re.compile(f"(?:{alternatives})(?![^\\W_]|'[^\\W_])")
                for m in pattern.finditer(text):
                    at = m.start()
                    if at and text[at - 1].isalnum():
                        continue  # inside a longer word
                    seen[forms[m.group()]].add(bisect.bisect_right(starts, at) - 1)
            for t in cjk:
                at = text.find(t)
                while at >= 0:
                    seen[t].add(bisect.bisect_right(starts, at) - 1)
                    at = text.find(t, at + 1)
            for t, docs in seen.items():
                found = self._found[t]
                for doc in docs:
                    found[doc] = found.get(doc, 0.0) + weight

    def stats(self, terms: list[str]) -> Stats:
        self._find(terms)
        df = {t: len(self._found[t]) for t in terms if self._found[t]}
        return df, len(self.keys), self.tokens

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        stats: Stats | None = None,
        candidates: int | None = None,
    ) -> list[tuple[str, float]]:
        terms = query_terms(query)
        if not terms or k <= 0:
            return []
        weighed = weigh(terms, self.stats, stats)
        if weighed is None:
            return []
        freq: dict[int, dict[str, float]] = {}
        for t in weighed.terms:
            for doc, f in self._found[t].items():
                freq.setdefault(doc, {})[t] = f
        idf, avgdl = weighed.idf, weighed.avgdl
        scores = {doc: bm25_of(fs, self._length(doc), idf, avgdl) for doc, fs in freq.items()}
        best = heapq.nsmallest(k, scores, key=lambda d: (-scores[d], d))
        return [(self.keys[d], scores[d]) for d in best]
