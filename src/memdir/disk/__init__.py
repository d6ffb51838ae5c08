"""memdir's own files: where a store's state lives (``layout``), writing them whole
(``atomic``), small JSON state (``statefile``), the writers' lock and the state folder's
identity (``lock``), and seeing hand edits of a folder (``watch``).
This package does NOT know what a memory is."""
