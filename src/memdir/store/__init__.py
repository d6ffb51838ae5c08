"""The stores: where memories are kept and every change to them is made safely.

- ``base``: the contract (``Store``) and the operations every backend shares (``StoreBase``).
- ``files``: ``MemoryStore``, a folder of Markdown files (the default backend), a package
  of its own (the folder, its catalogue, its index, its ranking side, its transactions).
- ``open_store``: the composition root's one choice between a folder and a database store,
  whose backend a wing serves by its URL's scheme (``memdir_postgres``: ``wings.backend``).

This package owns reading, writing, history, the log and ranking a store's memories. It does
NOT decide what to remember (``extract``, ``consolidate``), read several stores as one
(``scopes``) or talk to a model.
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import Config
from .base import Store, StoreBase, Taken, checked_items, origin_of, readable
from .files import MemoryStore, as_folder

__all__ = [
    "MemoryStore", "Store", "StoreBase", "Taken", "as_folder", "checked_items", "open_store",
    "origin_of", "readable",
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
        from ..wings import backend

        scheme = config.database_url.split(":", 1)[0].lower()
        return backend(scheme)(config, create=create, watch=watch)  # type: ignore[no-any-return]
    return MemoryStore(config.dir, config, create=create, watch=watch, progress=progress)
