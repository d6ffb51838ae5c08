"""The stores: where memories are kept and every change to them is made safely.

- ``base``: the contract (``Store``) and the operations every backend shares (``StoreBase``).
- ``files``: ``MemoryStore``, a folder of Markdown files (the default backend), a package
  of its own (the folder, its catalogue, its index, its ranking side, its transactions).
- ``pg``, ``pgsearch``, ``pgschema``: ``PgStore``, a named store in PostgreSQL
  (``memdir[postgres]``; the driver is imported only when a database is used).
- ``open_store``: the composition root's one choice between them.

This package owns reading, writing, history, the log and ranking a store's memories. It does
NOT decide what to remember (``extract``, ``consolidate``), read several stores as one
(``scopes``) or talk to a model.
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import Config
from .base import Store, StoreBase, Taken, checked_items
from .files import MemoryStore, as_folder

__all__ = [
    "MemoryStore", "Store", "StoreBase", "Taken", "as_folder", "checked_items", "open_store",
]  # fmt: skip


def open_store(
    config: Config,
    *,
    create: bool = False,
    watch: bool | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Store:
    """The project's store as ``config`` names it: the folder ``config.dir``, or, when
    ``config.database_url`` is set, the named store ``config.store`` in PostgreSQL
    (``memdir[postgres]``, whose driver is imported only then). StoreNotFound when it does not
    exist and ``create`` is false."""
    if config.database_url:
        from .pg import PgStore

        return PgStore(config, create=create, watch=watch)
    return MemoryStore(config.dir, config, create=create, watch=watch, progress=progress)
