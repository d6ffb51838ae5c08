"""Small shared state files: tolerant reads, no lost update between processes, private modes."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from memdir.disk.statefile import StateFile


def test_a_missing_or_damaged_file_reads_as_empty(tmp_path: Path) -> None:
    """A missing or damaged file reads as empty."""
    path = tmp_path / "state.json"
    assert StateFile(path).read() == {}
    path.write_text("{not json")
    assert StateFile(path).read() == {}
    path.write_text("[1, 2]")
    assert StateFile(path).read() == {}


def test_concurrent_changes_lose_no_update(tmp_path: Path) -> None:
    """Concurrent changes lose no update."""
    path = tmp_path / "state.json"

    def bump() -> None:
        for _ in range(50):
            StateFile(path).update(lambda s: s.__setitem__("n", int(s.get("n", 0)) + 1))

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert StateFile(path).read() == {"n": 200}


def test_a_private_file_stays_private(tmp_path: Path) -> None:
    """A private file stays private."""
    path = tmp_path / "sub" / "trusted.json"
    with StateFile(path, mode=0o600).changing() as state:
        state["x"] = 1
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and StateFile(path).read() == {"x": 1}
