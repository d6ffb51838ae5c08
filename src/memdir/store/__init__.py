"""The stores: where memories are kept and every change to them is made safely.

- ``base``: the contract (``Store``) and the operations every backend shares (``StoreBase``).
- ``files``: ``MemoryStore``, a folder of Markdown files (the default backend), a package
  of its own (the folder, its catalogue, its index, its ranking side, its transactions).
- ``pg``, ``pgsearch``, ``pgschema``: ``PgStore``, a named store in PostgreSQL
  (``memdir[postgres]``; the driver is imported only when a database is used).

This package owns reading, writing, history, the log and ranking a store's memories. It does
NOT decide what to remember (``extract``, ``consolidate``), read several stores as one
(``scopes``) or talk to a model.
"""

from .base import Store, StoreBase, Taken, checked_items
from .files import MemoryStore, as_folder

__all__ = ["MemoryStore", "Store", "StoreBase", "Taken", "as_folder", "checked_items"]
