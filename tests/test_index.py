"""The catalogue of a folder and MEMORY.md rendered from it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memdir import MemoryStore
from memdir.entry import render
from memdir.errors import InvalidMemory
from memdir.memfile import entry_from, read_file
from memdir.memory import Memory

TYPES = ("user_preference", "project_fact")


def test_render_groups_by_configured_type_then_others_sorted_by_name() -> None:
    """MEMORY.md groups memories by configured type, then the others, sorted by name."""
    entries = [
        entry_from(Memory(n, t, d), f"{n}.md", TYPES)
        for n, t, d in [
            ("zz", "project_fact", "Z"),
            ("aa", "project_fact", "A"),
            ("mine", "custom", "C"),
            ("me", "user_preference", "P"),
        ]
    ]
    text = render(entries, TYPES)
    assert (
        text.index("## user_preference") < text.index("## project_fact") < text.index("## custom")
    )
    assert text.index("[aa]") < text.index("[zz]")
    assert "_No memories yet._" in render([], TYPES)


def test_the_catalogue_reports_files_that_are_not_memories(store: MemoryStore) -> None:
    """The catalogue reports files that are not memories."""
    store.write("ok", type="project_fact", description="fine", body="x")
    (store.root / "broken.md").write_text("---\nname: [unclosed\n---\n")
    (store.root / "notes.txt").write_text("not markdown: ignored")
    (store.root / ".hidden.md").write_text("dot files are not memories")
    store.refresh()
    problems = {p.file: p for p in store.problems()}
    assert "broken.md" in problems and problems["broken.md"].severity == "error"
    assert "notes.txt" not in problems and ".hidden.md" not in problems
    assert [e.name for e in store.entries()] == ["ok"]
    assert "broken" not in store.index_path.read_text()


def test_two_files_claiming_one_name_are_reported(store: MemoryStore) -> None:
    """Two files claiming one name are reported."""
    store.write("tabs", type="user_preference", description="Tabs", body="x")
    (store.root / "tabs-copy.md").write_text((store.root / "tabs.md").read_text())
    store.refresh()
    assert any("tabs" in p.reason for p in store.problems())
    assert [e.name for e in store.entries()] == ["tabs"]


def test_read_file_refuses_links_and_huge_files(tmp_path: Path) -> None:
    """Reading a memory file refuses links and huge files."""
    (tmp_path / "real.md").write_text("x")
    (tmp_path / "link.md").symlink_to(tmp_path / "real.md")
    with pytest.raises(InvalidMemory):
        read_file(tmp_path / "link.md", 1000)
    (tmp_path / "big.md").write_bytes(b"x" * 2000)
    with pytest.raises(InvalidMemory):
        read_file(tmp_path / "big.md", 1000)
    assert read_file(tmp_path / "real.md", 1000) == b"x"
    assert os.path.exists(tmp_path / "real.md")
