"""The SQLite plumbing of the search index and the vectors."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memdir.cachedb import CacheDB


class Docs(CacheDB):
    def _schema(self, db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE IF NOT EXISTS docs (key TEXT PRIMARY KEY, identity TEXT)")


def test_compare_says_what_to_read_again_and_what_to_drop(tmp_path: Path) -> None:
    """Compare says what to read again and what to drop."""
    db = Docs(tmp_path / "c.sqlite")
    db.db.executemany(
        "INSERT INTO docs VALUES (?, ?)", [("a.md", "1"), ("b.md", "2"), ("gone.md", "3")]
    )
    stale, removed = db.compare({"a.md": "1", "b.md": "changed", "new.md": "9", "c.md": None}, None)
    assert sorted(stale) == ["b.md", "c.md", "new.md"] and removed == ["gone.md"]
    stale, removed = db.compare({"a.md": "other"}, ["a.md"])
    assert stale == ["a.md"] and removed == []


def test_select_in_asks_in_chunks(tmp_path: Path) -> None:
    """A lookup of more keys than SQLite takes in one statement is asked in chunks and returns every
    row."""
    db = Docs(tmp_path / "c.sqlite")
    db.db.executemany("INSERT INTO docs VALUES (?, ?)", [(f"{i}.md", str(i)) for i in range(1200)])
    keys = [f"{i}.md" for i in range(0, 1200, 1)]
    rows = list(db.select_in("SELECT key FROM docs WHERE key IN ({})", keys))
    assert len(rows) == 1200


def test_a_damaged_file_is_discarded_and_recreated(tmp_path: Path) -> None:
    """A damaged file is discarded and recreated."""
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"garbage, not SQLite" * 200)
    db = Docs(path)
    db.db.execute("INSERT INTO docs VALUES ('a.md', '1')")
    db.close()
    assert Docs(path).db.execute("SELECT key FROM docs").fetchall() == [("a.md",)]


def test_an_unwritable_place_keeps_the_cache_in_memory(tmp_path: Path) -> None:
    """An unwritable place keeps the cache in memory."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        db = Docs(ro / "c.sqlite")
        if db.path == ":memory:":  # (root may write anywhere: then it is an ordinary file)
            db.db.execute("INSERT INTO docs VALUES ('a.md', '1')")
        assert db.db.execute("SELECT count(*) FROM docs").fetchone()[0] >= 0
    finally:
        ro.chmod(0o700)
