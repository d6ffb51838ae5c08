"""Atomic writes and no-follow appends."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memdir.disk.atomic import (
    INTENT_BLOCK,
    TEMP_PREFIX,
    append_nofollow,
    clear_intent,
    intent_pending,
    private,
    write_atomic,
    write_intent,
)


def test_write_replaces_whole_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    """Write replaces whole and leaves no temporary file."""
    path = tmp_path / "m.md"
    path.write_text("old")
    inode = path.stat().st_ino
    write_atomic(path, b"new text")
    assert path.read_bytes() == b"new text" and path.stat().st_ino != inode
    assert not [f for f in os.listdir(tmp_path) if f.startswith(TEMP_PREFIX)]


def test_staged_write_puts_its_temporary_file_elsewhere(tmp_path: Path) -> None:
    """Staged write puts its temporary file elsewhere."""
    stage = tmp_path / "stage"
    stage.mkdir()
    write_atomic(tmp_path / "m.md", b"x", stage=stage)
    assert (tmp_path / "m.md").read_bytes() == b"x" and os.listdir(stage) == []


def test_files_in_an_owner_only_folder_are_owner_only(tmp_path: Path) -> None:
    """Files written in an owner-only folder are owner-only."""
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    assert private(mine) and not private(tmp_path / "missing")
    write_atomic(mine / "m.md", b"x")
    assert (mine / "m.md").stat().st_mode & 0o777 == 0o600
    write_atomic(mine / "n.md", b"x", mode=0o644)
    assert (mine / "n.md").stat().st_mode & 0o777 == 0o644


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    """A failed write keeps the old file."""
    path = tmp_path / "m.md"
    path.write_text("old")
    with pytest.raises(FileNotFoundError):
        write_atomic(path, b"new", stage=tmp_path / "no-such-folder")
    assert path.read_text() == "old"


def test_append_refuses_a_link(tmp_path: Path) -> None:
    """Append refuses a link."""
    target = tmp_path / "elsewhere"
    target.write_text("")
    (tmp_path / "log").symlink_to(target)
    with pytest.raises(OSError):
        append_nofollow(tmp_path / "log", b"line\n")
    assert target.read_text() == ""
    append_nofollow(tmp_path / "real", b"a\n")
    append_nofollow(tmp_path / "real", b"b\n", sync=True)
    assert (tmp_path / "real").read_text() == "a\nb\n"


def test_memory_md_is_a_new_file_renamed_in_and_a_reader_opening_it_kills_nobody(
    tmp_path: Path,
) -> None:
    """MEMORY.md is written as every other file: a new file, fsynced and renamed over the old
    one. A reader that keeps an earlier MEMORY.md open reads that whole file to its end, and a
    second process opening MEMORY.md (and every file of the state folder) in a loop while the
    store writes neither kills the writer nor ever sees a torn file."""
    import subprocess
    import sys

    from memdir import MemoryStore

    store = MemoryStore(tmp_path / ".memory")
    index = store.index_path
    store.write("note-0", type="project_fact", description="Note 0")
    reader = open(index, "rb")  # noqa: SIM115 - held open across writes, as a slow reader
    try:
        seen = reader.read()
        store.write("note-1", type="project_fact", description="Note 1")
        reader.seek(0)
        assert reader.read() == seen and b"note-1" in index.read_bytes()
    finally:
        reader.close()

    opener = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys, time\n"
            "end = time.monotonic() + 60\n"
            "while time.monotonic() < end:\n"
            "    for r in sys.argv[1:]:\n"
            "        for d, _, fs in os.walk(r):\n"
            "            for f in fs:\n"
            "                try:\n"
            "                    open(os.path.join(d, f), 'rb').close()\n"
            "                except OSError:\n"
            "                    pass\n",
            str(store.root),
            str(store.internal),
        ]
    )
    try:
        for i in range(2, 60):
            store.write(f"note-{i}", type="project_fact", description=f"Note {i}")
            text = index.read_bytes()
            assert text == b"".join(store._catalog.render()) and f"note-{i}".encode() in text
    finally:
        opener.kill()
        opener.wait()
    assert not [p for p in store.root.iterdir() if p.name.startswith(TEMP_PREFIX)]


def test_an_intent_keeps_its_file_and_size_and_is_blank_once_cleared(tmp_path: Path) -> None:
    """The journal is written over in place, padded to whole blocks; cleared, it is blank
    (nothing pending) and the next intent reuses the same file."""
    path = tmp_path / "journal.json"
    assert not intent_pending(path)  # none yet
    write_intent(path, b'{"id": "a", "steps": []}')
    inode = os.stat(path).st_ino
    assert os.path.getsize(path) == INTENT_BLOCK and intent_pending(path)
    assert json.loads(path.read_bytes()) == {"id": "a", "steps": []}  # blanks parse away
    clear_intent(path)
    assert not intent_pending(path) and path.read_bytes() == b" " * INTENT_BLOCK
    write_intent(path, b'{"id": "b"}')
    assert os.stat(path).st_ino == inode and json.loads(path.read_text()) == {"id": "b"}


def test_an_intent_longer_than_a_block_is_blanked_whole(tmp_path: Path) -> None:
    path = tmp_path / "journal.json"
    long = json.dumps({"steps": ["x" * 9000]}).encode()
    write_intent(path, long)
    assert os.path.getsize(path) == 3 * INTENT_BLOCK
    clear_intent(path)
    assert not intent_pending(path) and not path.read_bytes().strip()
    write_intent(path, b'{"id": "c"}')  # shorter again: nothing of the long one is left
    assert os.path.getsize(path) == INTENT_BLOCK and json.loads(path.read_bytes()) == {"id": "c"}


def test_a_journal_that_is_not_a_plain_file_counts_as_pending(tmp_path: Path) -> None:
    """Something that is not blank, or not ours to read (a link), is never taken for done."""
    (tmp_path / "target").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    assert intent_pending(tmp_path / "link")
    (tmp_path / "torn").write_bytes(b'{"id": "half' + b" " * 10)
    assert intent_pending(tmp_path / "torn")
    (tmp_path / "empty").write_bytes(b"")
    assert not intent_pending(tmp_path / "empty")  # (an older memdir emptied it)
