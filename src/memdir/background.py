"""The background indexer as a search sees it: starting ``memdir index --background`` for a
store, whether one holds the store's embedding lock now, and how much the caches hold (read
without opening them for writing).
This module does NOT index or embed anything itself (``memdir index`` does, through
``lookup``).
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path


def indexed(path: Path | str) -> int:
    """How many memories the search index at ``path`` holds (0: none, or one to be rebuilt)."""
    from .search import SCHEMA_VERSION

    return cache_count(path, "SELECT docs FROM stats", SCHEMA_VERSION)


def indexer_at_work(lock: Path) -> bool:
    """Whether a background ``memdir index`` holds the embedding lock at ``lock``."""
    if not lock.exists():
        return False
    import filelock

    held = filelock.FileLock(str(lock), timeout=0)
    try:
        held.acquire()
    except (filelock.Timeout, OSError):
        return True
    held.release()
    return False


def cache_count(path: Path | str, sql: str, version: int | None = None) -> int:
    """A number a cache file holds, read without opening it for writing (0 when there is no
    file, or one of another ``version``, which would be rebuilt)."""
    if not isinstance(path, Path) or not path.is_file():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            if version is not None and db.execute("PRAGMA user_version").fetchone()[0] != version:
                return 0
            return int(db.execute(sql).fetchone()[0])
    except (sqlite3.Error, TypeError):
        return 0


def embed_in_background(root: Path) -> bool:
    """Start ``memdir index --background`` for the store at ``root`` (it embeds at low
    priority and exits at once if another one is at work); False if it could not start."""
    from .spawn import start_memdir

    try:
        start_memdir(["--dir", str(root.absolute()), "index", "--background"])
    except OSError:
        return False
    return True
