"""The folder backend: a store kept as Markdown files in a folder, with ``MEMORY.md``.

``store.MemoryStore`` is the store; ``folder.Folder`` the live view of the folder (the
catalogue kept current, ``MEMORY.md`` verified and repaired, hand edits recorded);
``catalog.Catalog`` what the files are; ``storeindex.StoreIndex`` the one derived index
(rows, full text, vectors, texts); ``lookup.Lookup`` its ranking side; ``transaction`` the
write side, under the writers' lock, with its journal and history.
"""

from .store import MemoryStore as MemoryStore
from .store import as_folder as as_folder
