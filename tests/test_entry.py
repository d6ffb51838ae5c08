"""Entries (a memory's metadata) and search hits."""

from __future__ import annotations

from memdir import MemoryStore
from memdir.entry import Entry, Hit
from memdir.memfile import entry_from
from memdir.memory import Memory

TYPES = ("user_preference", "project_fact")


def test_index_line_links_the_file_and_renders_the_description_literally() -> None:
    """Index line links the file and renders the description literally."""
    mem = Memory("build", "project_fact", "Run [make](http://x) <b>now</b>")
    e = entry_from(mem, "build.md", TYPES)
    assert e.index_line == r"- [build](build.md) — Run \[make\](http://x) \<b\>now\</b\>"
    odd = entry_from(Memory("réponse", "project_fact", "x"), "réponse.md", TYPES)
    assert "(r%C3%A9ponse.md)" in odd.index_line


def test_warnings_and_the_conflict_mark_travel_with_the_entry() -> None:
    """Warnings and the conflict mark travel with the entry."""
    mem = Memory("tabs", "odd_type", "Tabs", extra={"conflict": {"other": "abc"}})
    e = entry_from(mem, "tabs.md", TYPES)
    assert e.conflicted and any("unknown type" in w for w in e.warnings)
    data = e.to_dict()
    assert data["conflicted"] is True and data["file"] == "tabs.md"
    assert not entry_from(Memory("a", "project_fact", "A"), "a.md", TYPES).conflicted


def test_a_cache_row_gives_the_same_entry() -> None:
    """An entry read back from a metadata cache row equals the one parsed from the file."""
    e = entry_from(
        Memory("a", "project_fact", "A", created="t1", extra={"pinned": True}), "a.md", TYPES
    )
    row = ["a.md", 1, 2, 3, e.name, e.type, e.description, e.created, e.updated, e.pinned, []]
    assert Entry.from_row(row, "a.md") == e


def test_a_hit_reads_its_memory_on_first_use_only(store: MemoryStore) -> None:
    """A hit reads its memory on first use only."""
    store.write("tabs", type="user_preference", description="Tabs please", body="width 4")
    [hit] = store.search("tabs", 1, explain=True)
    assert isinstance(hit, Hit) and hit.name == "tabs" and hit.entry.file == "tabs.md"
    assert hit.bm25_rank == 1 and hit.memory.body == "width 4"
    (store.root / "tabs.md").unlink()
    assert hit.memory.body == "width 4"  # read once, kept
    data = hit.to_dict(explain=True)
    assert data["name"] == "tabs" and data["bm25_rank"] == 1 and "cosine" in data
    assert "bm25_rank" not in hit.to_dict()
