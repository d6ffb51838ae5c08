"""The live view of a store's folder: MEMORY.md verified and repaired, hand edits seen."""

from __future__ import annotations

from pathlib import Path

from memdir import MemoryStore


def test_memory_md_edited_by_hand_is_rendered_again_on_open(store: MemoryStore) -> None:
    """MEMORY.md edited by hand is rendered again on open."""
    store.write("tabs", type="user_preference", description="Tabs", body="x")
    store.index_path.write_text("# my own notes\n")
    again = MemoryStore(store.root)
    assert "[tabs](tabs.md)" in again.index_path.read_text()


def test_a_file_dropped_in_by_hand_is_listed_and_indexed(store: MemoryStore) -> None:
    """A file dropped in by hand is listed and indexed."""
    store.entries()
    (store.root / "deploy.md").write_text(
        "---\nname: deploy\ntype: project_fact\ndescription: How we deploy\n---\nmake deploy\n"
    )
    assert [e.name for e in store.entries()] == ["deploy"]
    assert "[deploy](deploy.md)" in store.index_path.read_text()


def test_a_file_deleted_by_hand_leaves_the_index(store: MemoryStore) -> None:
    """A file deleted by hand leaves the index."""
    store.write("tabs", type="user_preference", description="Tabs", body="x")
    store.write("pytest", type="user_preference", description="Pytest", body="x")
    (store.root / "tabs.md").unlink()
    assert [e.name for e in store.entries()] == ["pytest"]
    assert "tabs" not in store.index_path.read_text()


def test_temporary_files_of_a_crashed_writer_are_cleared_by_a_reader(tmp_path: Path) -> None:
    """Temporary files of a crashed writer are cleared by a reader."""
    store = MemoryStore(tmp_path / ".memory")
    store.write("tabs", type="user_preference", description="Tabs", body="x")
    (store.root / ".tmp-crashed.part").write_text("half")
    MemoryStore(store.root).entries()  # a reader finds the lock free and tidies up
    assert not (store.root / ".tmp-crashed.part").exists()


def test_a_writer_killed_inside_the_index_transaction_loses_nothing(tmp_path: Path) -> None:
    """A process killed while it writes the store's index (its rows written, its documents
    and commit not yet) leaves an index the next process reads as before the change: the
    memory the killed writer saved is listed, found by a word of its body, and so are the
    others; MEMORY.md lists every one."""
    import subprocess
    import sys

    from conftest import child_env

    root = tmp_path / ".memory"
    store = MemoryStore(root)
    for i in range(5):
        store.write(f"note-{i}", type="project_fact", description=f"Note {i}", body=f"topic{i}")
    store.close()
    code = (
        "import os, sys\n"
        "from memdir import MemoryStore\n"
        "from memdir.find.search import SearchIndex\n"
        "store = MemoryStore(sys.argv[1])\n"
        "store.entries()\n"
        "def killed(self, *a, **k):\n"
        "    os._exit(9)  # inside the index's transaction: rows written, no commit\n"
        "SearchIndex.update = killed\n"
        "store.write('late', type='project_fact', description='Late', body='zebracrossing')\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(root)], env=child_env(), capture_output=True, timeout=60
    )
    assert r.returncode == 9, r.stderr
    again = MemoryStore(root)
    assert sorted(e.name for e in again.entries()) == ["late"] + [f"note-{i}" for i in range(5)]
    assert again.search("zebracrossing", 3)[0].name == "late"
    assert again.search("topic3", 3)[0].name == "note-3"
    assert "[late](late.md)" in again.index_path.read_text()
    assert not again.problems()
