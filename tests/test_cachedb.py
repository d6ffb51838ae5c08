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


def test_a_noted_match_holds_until_any_process_writes_a_document(tmp_path: Path) -> None:
    """A cache found to match the files says so to the next process, until a document is
    written, changed or removed through any connection (the others' writes included)."""
    path = tmp_path / "c.sqlite"
    db = Docs(path)
    db.db.executemany("INSERT INTO docs VALUES (?, ?)", [("a.md", "1"), ("b.md", "2")])
    assert not db.in_line_with("fp")
    db.note_in_line("fp", {"a.md": "1", "b.md": "2"})
    assert db.in_line_with("fp") and not db.in_line_with("other")
    assert Docs(path).in_line_with("fp")  # another process reads it
    for change in (
        "INSERT INTO docs VALUES ('c.md', '3')",
        "UPDATE docs SET identity = '9' WHERE key = 'a.md'",
        "DELETE FROM docs WHERE key = 'b.md'",
    ):
        db.note_in_line("fp", dict(db.db.execute("SELECT key, identity FROM docs").fetchall()))
        assert db.in_line_with("fp")
        other = Docs(path)
        other.db.execute(change)  # a write by another process
        assert not db.in_line_with("fp"), change
        other.close()


def test_a_match_is_noted_only_when_the_documents_match(tmp_path: Path) -> None:
    """What a caller compared a moment ago is checked again inside the write lock: documents
    another process wrote in between, an untrusted identity, or a held lock note nothing."""
    path = tmp_path / "c.sqlite"
    db = Docs(path)
    db.db.execute("INSERT INTO docs VALUES ('a.md', '1')")
    db.note_in_line("fp", {"a.md": "2"})  # (the document says otherwise)
    assert not db.in_line_with("fp")
    db.note_in_line("fp", {"a.md": None})  # (changed too recently to trust)
    assert not db.in_line_with("fp")
    other = Docs(path)
    other.db.execute("BEGIN IMMEDIATE")  # another writer at work: no wait, nothing noted
    db.note_in_line("fp", {"a.md": "1"})
    other.db.execute("ROLLBACK")
    assert not db.in_line_with("fp")
    db.note_in_line("fp", {"a.md": "1"})
    assert db.in_line_with("fp")


def test_a_rebuilt_cache_forgets_its_match(tmp_path: Path) -> None:
    """A cache rebuilt (damaged, or of another schema) holds nothing it was found to match."""

    class Versioned(Docs):
        version = 1

        def _schema(self, db: sqlite3.Connection) -> None:
            if db.execute("PRAGMA user_version").fetchone()[0] != self.version:
                self.rebuilt = True
                db.execute("DROP TABLE IF EXISTS docs")
                db.execute(f"PRAGMA user_version = {self.version}")
            super()._schema(db)

    path = tmp_path / "c.sqlite"
    db = Versioned(path)
    db.note_in_line("fp", {})
    db.close()
    assert Versioned(path).in_line_with("fp")
    Versioned.version = 2
    assert not Versioned(path).in_line_with("fp")
