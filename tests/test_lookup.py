"""The search index and vectors of a store: which SQLite errors mean "rebuild the cache"."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memdir.cachedb import damaged


@pytest.mark.parametrize(
    "error, rebuild",
    [
        (sqlite3.DatabaseError("database disk image is malformed"), True),
        (sqlite3.DatabaseError("file is not a database"), True),
        (sqlite3.OperationalError("Could not decode to UTF-8 column 'body' with text 'x'"), True),
        (sqlite3.OperationalError("database is locked"), False),
        (sqlite3.OperationalError("database table is locked: docs"), False),
        (sqlite3.OperationalError("database is busy"), False),
    ],
)
def test_what_counts_as_a_damaged_cache(error: sqlite3.DatabaseError, rebuild: bool) -> None:
    """Which SQLite errors mean a damaged cache to rebuild, and which do not."""
    assert damaged(error) is rebuild


def test_a_cache_with_text_that_is_not_utf8_any_more_is_rebuilt(tmp_path: Path) -> None:
    """A cache with text that is not UTF-8 any more is rebuilt."""
    from memdir import MemoryStore

    store = MemoryStore(tmp_path / ".memory")
    store.write("n", type="project_fact", description="Kappa note", body="kappa lambda")
    assert store.search("kappa")
    store.close()
    db = sqlite3.connect(str(tmp_path / ".memory" / ".memdir" / "search.sqlite"))
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for table in tables:
        columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
        if "body" in columns:
            db.execute(f"UPDATE {table} SET body = CAST(X'FFFE6B61' AS TEXT)")
    db.commit()
    db.close()
    fresh = MemoryStore(tmp_path / ".memory")
    assert [h.memory.name for h in fresh.search("kappa")] == ["n"]
