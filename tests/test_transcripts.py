"""Session files of Claude Code and Codex: read as messages, never from a pipe or a device."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memdir.errors import MemdirError
from memdir.integrations.transcripts import MAX_BYTES, read_session


def test_plain_rows_and_host_context(tmp_path: Path) -> None:
    """A host's session file gives its user and assistant turns, without the host's injected
    context, torn lines or junk rows."""
    path = tmp_path / "s.jsonl"
    rows = [
        {"type": "user", "message": {"role": "user", "content": "use pnpm"}},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "<environment_context>cwd=/x</environment_context>"},
        "not an object",
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + '\n{"torn": ')
    messages = read_session(path)
    assert [m["content"] for m in messages][:2] == ["use pnpm", "ok"]
    assert not any("environment_context" in str(m["content"]) for m in messages)


@pytest.mark.parametrize("kind", ["fifo", "device", "missing"])
def test_only_regular_files_are_read(tmp_path: Path, kind: str) -> None:
    """Only regular files are read."""
    path = tmp_path / "t.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    with pytest.raises(MemdirError, match=r"not a regular file|cannot read"):
        read_session(path)


def test_a_huge_session_is_read_from_its_tail(tmp_path: Path) -> None:
    """A huge session is read from its tail."""
    path = tmp_path / "big.jsonl"
    old = json.dumps({"role": "user", "content": "x" * 1000}) + "\n"
    with open(path, "w") as fh:
        for _ in range(MAX_BYTES // len(old) + 10):
            fh.write(old)
        fh.write(json.dumps({"role": "user", "content": "the latest words"}) + "\n")
    messages = read_session(path)
    assert messages[-1]["content"] == "the latest words"
    assert len(messages) <= MAX_BYTES // len(old) + 1
