"""Small shared state files: tolerant reads, no lost update between processes, private modes."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from memdir.disk.statefile import StateFile, read_lines


def test_a_missing_or_damaged_file_reads_as_empty(tmp_path: Path) -> None:
    """A missing or damaged file reads as empty."""
    path = tmp_path / "state.json"
    assert StateFile(path).read() == {}
    path.write_text("{not json")
    assert StateFile(path).read() == {}
    path.write_text("[1, 2]")
    assert StateFile(path).read() == {}


def test_a_log_reads_its_whole_objects_and_its_tail(tmp_path: Path) -> None:
    """A log of one JSON object per line reads every whole object, oldest first, and skips
    what is not one (a torn last line from a crash, a hand-typed line, a list); its last N
    are read from the tail, whatever its length; a missing or unreadable log reads as
    nothing."""
    log = tmp_path / "log.jsonl"
    assert read_lines(log) == []
    lines = [f'{{"n": {n}, "pad": "{"x" * 300}"}}' for n in range(200)]
    log.write_text("\n".join([*lines[:100], "not json", "[1, 2]", *lines[100:]]) + '\n{"n": 2')
    got = read_lines(log)
    assert [r["n"] for r in got] == list(range(200))
    assert [r["n"] for r in read_lines(log, 3)] == [197, 198, 199]
    log.write_bytes(b'{"n": 1}\n\xff\xfe{"n": 2}\n')  # not UTF-8: the line is skipped, not the log
    assert [r["n"] for r in read_lines(log)] == [1]
    log.unlink()
    log.mkdir()
    assert read_lines(log) == []


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
