"""History versions and the operation log of a store."""

from __future__ import annotations

from pathlib import Path

import pytest

from memdir import MemoryStore
from memdir.errors import ConflictError, MemoryNotFound
from memdir.history import History


def test_versions_are_numbered_once_per_operation(tmp_path: Path) -> None:
    """Versions are numbered once per operation."""
    h = History(tmp_path / "history", tmp_path / "log.jsonl")
    (tmp_path / "history").mkdir()
    assert h.keep("tabs", b"v1", "update", "edit", "op-1") == 1
    assert h.keep("tabs", b"v1 again", "update", "edit", "op-1") == 1  # after a crash: once
    assert h.keep("tabs", b"v2", "delete", "gone", "op-2") == 2
    assert [(v.version, v.action, v.op) for v in h.versions("tabs")] == [
        (1, "update", "op-1"),
        (2, "delete", "op-2"),
    ]
    assert h.text("tabs", 2) == "v2" and h.version_of("tabs", "op-1") == 1
    with pytest.raises(MemoryNotFound, match="has no version 7"):
        h.text("tabs", 7)


def test_purge_removes_one_version_or_all(tmp_path: Path) -> None:
    """Purge removes one version or all."""
    h = History(tmp_path / "history", tmp_path / "log.jsonl")
    (tmp_path / "history").mkdir()
    for i in range(3):
        h.keep("tabs", f"v{i}".encode(), "update", "", f"op-{i}")
    assert h.purge("tabs", 2) == 1
    assert [v.version for v in h.versions("tabs")] == [1, 3]
    assert h.purge("tabs") == 2 and h.versions("tabs") == []
    assert not (tmp_path / "history" / "tabs").exists()


def test_a_planted_link_is_refused(tmp_path: Path) -> None:
    """A planted link is refused."""
    (tmp_path / "history").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "history" / "tabs").symlink_to(tmp_path / "outside")
    h = History(tmp_path / "history", tmp_path / "log.jsonl")
    with pytest.raises(ConflictError, match="symbolic link"):
        h.keep("tabs", b"x", "update", "", "op")
    assert h.versions("tabs") == [] and list((tmp_path / "outside").iterdir()) == []


def test_the_log_survives_a_torn_line_and_reads_its_tail(store: MemoryStore) -> None:
    """The log survives a torn line and reads its tail."""
    for i in range(5):
        store.write(f"m{i}", type="project_fact", description=f"fact {i}", body="x")
    with open(store.internal / "log.jsonl", "a") as fh:
        fh.write('{"id": "torn", "ti')
    ops = store.log()
    assert [op.summary or op.changes[0]["name"] for op in ops][-1] == "m4"
    assert [op.changes[0]["name"] for op in store.log(limit=2)] == ["m3", "m4"]
    assert ops[-1].changes[0]["action"] == "create" and ops[-1].changes[0]["before"] is None
