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
