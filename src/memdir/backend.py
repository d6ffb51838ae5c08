"""Which backend a configuration's project store lives in: the folder (``MemoryStore``) or,
when ``database_url`` is set, a named store in PostgreSQL (``PgStore``, ``memdir[postgres]``).
Entry points open their store here; both implement ``store.Store``.
This module does NOT import the database driver unless a database is configured.
"""

from __future__ import annotations

from collections.abc import Callable

from .config import Config
from .store import MemoryStore, Store


def open_store(
    config: Config,
    *,
    create: bool = False,
    watch: bool | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Store:
    """The project's store as ``config`` names it: ``config.dir``, or the database store
    ``config.store`` when ``config.database_url`` is set. StoreNotFound when it does not exist
    and ``create`` is false."""
    if config.database_url:
        from .store.pg import PgStore

        return PgStore(config, create=create, watch=watch)
    return MemoryStore(config.dir, config, create=create, watch=watch, progress=progress)
