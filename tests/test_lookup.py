"""The search index and vectors of a store: which SQLite errors mean "rebuild the cache"."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memdir.disk.layout import state_dir
from memdir.find.cachedb import damaged


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
    db = sqlite3.connect(str(state_dir(tmp_path / ".memory") / "index.sqlite"))
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for table in tables:
        columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
        if "body" in columns:
            db.execute(f"UPDATE {table} SET body = CAST(X'FFFE6B61' AS TEXT)")
    db.commit()
    db.close()
    fresh = MemoryStore(tmp_path / ".memory")
    assert [h.memory.name for h in fresh.search("kappa")] == ["n"]


def test_a_new_process_reads_only_the_files_changed_since_the_index_saw_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's index keeps what each file parsed to with its text: a new process reads
    no file that is unchanged, and a file edited in place (same size), added or deleted by
    hand since is read (only it) and found by the next search, the deleted one gone."""
    import time

    from memdir import MemoryStore
    from memdir.config import Config
    from memdir.store.files import catalog as catalog_module

    root = tmp_path / ".memory"
    config = Config(dir=root, embedder="none")
    store = MemoryStore(root, config)
    for i in range(3):
        store.write(f"n{i}", type="project_fact", description=f"Note {i}", body=f"alpha{i}")
    store.close()
    time.sleep(0.1)  # (older than the window in which an identity is not trusted)

    read: list[str] = []
    real = catalog_module.read_file

    def counting(path: str, max_bytes: int) -> bytes:
        read.append(Path(path).name)
        return real(path, max_bytes)

    def first_search(query: str) -> list[str]:
        read.clear()
        fresh = MemoryStore(root, config)
        try:
            return [h.name for h in fresh.search(query)]
        finally:
            fresh.close()

    monkeypatch.setattr(catalog_module, "read_file", counting)
    assert first_search("alpha1") == ["n1"]
    # written a moment before: their identity was too recent to trust, so read once more
    assert sorted(read) == ["n0.md", "n1.md", "n2.md"]
    assert first_search("alpha1") == ["n1"]
    assert read == []  # every file as the index saw it: none read again
    path = root / "n1.md"
    text = path.read_text()
    with open(path, "r+", encoding="utf-8") as fh:  # edited in place, same size
        fh.write(text.replace("alpha1", "omega1"))
    (root / "n2.md").unlink()
    (root / "hand.md").write_text(
        "---\nname: hand\ntype: project_fact\ndescription: By hand\n---\nzeta\n"
    )
    time.sleep(0.1)
    assert first_search("omega1") == ["n1"]
    assert sorted(read) == ["hand.md", "n1.md"]
    assert first_search("alpha1") == [] and first_search("alpha2") == []
    assert first_search("zeta") == ["hand"] and read == []
