"""Undo: the last operation reverted, walking back, never over a later hand edit."""

from __future__ import annotations

import pytest

from memdir import MemoryStore
from memdir.errors import ConflictError, MemdirError
from memdir.memory import Memory
from memdir.plan import Put, Remove
from memdir.undo import undo


def test_undo_walks_back_operation_by_operation(store: MemoryStore) -> None:
    """Undo walks back operation by operation."""
    store.write("tabs", type="user_preference", description="Tabs", body="width 4")
    store.apply(
        [
            Put(Memory("tabs", "user_preference", "Tabs", "width 8")),
            Put(Memory("pytest", "user_preference", "Pytest", "pytest -q")),
        ],
        source="extract",
    )
    target, op = undo(store)
    assert target.source == "extract" and op is not None and op.undoes == target.id
    assert store.get("tabs").body == "width 4" and "pytest" not in store
    undo(store)  # the first write: the memory goes (into history)
    assert "tabs" not in store and store.history("tabs")
    with pytest.raises(MemdirError, match="nothing to undo"):
        undo(store)


def test_undo_of_a_delete_brings_the_memory_back(store: MemoryStore) -> None:
    """Undo of a delete brings the memory back."""
    store.write("tabs", type="user_preference", description="Tabs", body="width 4")
    store.apply([Remove("tabs", reason="stale")], source="consolidate")
    undo(store)
    assert store.get("tabs").body == "width 4"


def test_undo_refuses_over_a_later_hand_edit_unless_forced(store: MemoryStore) -> None:
    """Undo refuses over a later hand edit unless forced."""
    store.write("tabs", type="user_preference", description="Tabs", body="width 4")
    store.write("tabs", type="user_preference", description="Tabs", body="width 8")
    path = store.root / "tabs.md"
    path.write_text(path.read_text().replace("width 8", "width 2 (by hand)"))
    with pytest.raises(ConflictError, match="changed after"):
        undo(store)
    assert "by hand" in path.read_text()
    undo(store, force=True)
    assert store.get("tabs").body == "width 4"
    assert any("by hand" in store.version_text("tabs", v.version) for v in store.history("tabs"))
