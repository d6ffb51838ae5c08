"""The SQLite plumbing of the search index and the vectors."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memdir.find.cachedb import CacheDB


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


class Part(CacheDB):
    DOCS = "part_docs"
    schema = "1"

    def _schema(self, db: sqlite3.Connection) -> None:
        self.built(
            db,
            "part",
            self.schema,
            "DROP TABLE IF EXISTS part_docs;"
            " CREATE TABLE part_docs (key TEXT PRIMARY KEY, identity TEXT)",
        )


def test_parts_of_one_file_change_in_one_transaction(tmp_path: Path) -> None:
    """Two parts sharing one file: a transaction that fails changes neither; one that ends
    changes both, for every process that opens the file."""
    path = tmp_path / "c.sqlite"
    docs = Docs(path)
    part = Part(shared=docs)
    try:
        with docs.transaction() as db:
            db.execute("INSERT INTO docs VALUES ('a.md', '1')")
            with part.transaction():  # (a part's own transaction inside: the same one)
                db.execute("INSERT INTO part_docs VALUES ('a.md', '1')")
            raise RuntimeError("stopped half way")
    except RuntimeError:
        pass
    assert docs.db.execute("SELECT count(*) FROM docs").fetchone()[0] == 0
    assert part.db.execute("SELECT count(*) FROM part_docs").fetchone()[0] == 0
    with docs.transaction() as db:
        db.execute("INSERT INTO docs VALUES ('a.md', '1')")
        db.execute("INSERT INTO part_docs VALUES ('a.md', '1')")
    other = Docs(path)
    assert other.db.execute("SELECT key FROM docs").fetchall() == [("a.md",)]
    assert Part(shared=other).db.execute("SELECT key FROM part_docs").fetchall() == [("a.md",)]


def test_a_part_of_another_schema_is_rebuilt_alone(tmp_path: Path) -> None:
    """A part whose recorded schema differs is emptied and says it was rebuilt; the other
    parts of the file keep what they hold."""
    path = tmp_path / "c.sqlite"
    docs = Docs(path)
    part = Part(shared=docs)
    assert part.rebuilt  # (new)
    docs.db.execute("INSERT INTO docs VALUES ('a.md', '1')")
    docs.db.execute("INSERT INTO part_docs VALUES ('a.md', '1')")
    docs.close()
    again = Docs(path)
    assert not Part(shared=again).rebuilt
    Part.schema = "2"
    try:
        newer = Part(shared=Docs(path))
    finally:
        Part.schema = "1"
    assert newer.rebuilt
    assert newer.db.execute("SELECT count(*) FROM part_docs").fetchone()[0] == 0
    assert newer.db.execute("SELECT key FROM docs").fetchall() == [("a.md",)]


def test_a_store_index_whose_parts_differ_in_age_is_rebuilt_whole(tmp_path: Path) -> None:
    """The catalogue rows and the full-text documents are of one age: when either part was
    built again (another schema), both are emptied, and the catalogue reads every file."""
    from memdir.entry import Entry
    from memdir.memory import Memory
    from memdir.store.files.storeindex import Parsed, StoreIndex

    path = tmp_path / "index.sqlite"
    index = StoreIndex(path)
    mem = Memory("n", "project_fact", "A note", "alpha beta")
    entry = Entry("n", "project_fact", "A note", None, None, False, "n.md")
    index.write({"n.md": Parsed((10, 1_000, 7), entry, None, mem)})
    assert list(index.rows()) == ["n.md"] and index.text.search("alpha")[0][0] == "n.md"
    index.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = 'older' WHERE key = 'search'")
    db.commit()
    db.close()
    again = StoreIndex(path)
    assert again.rebuilt and again.rows() == {} and again.text.search("alpha") == []
