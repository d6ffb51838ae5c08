"""Atomic writes and no-follow appends."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memdir.atomic import (
    INTENT_BLOCK,
    TEMP_PREFIX,
    append_nofollow,
    clear_intent,
    intent_pending,
    private,
    rewrite_atomic,
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


def test_memory_md_is_rewritten_into_its_previous_version_and_readers_keep_whole_files(
    tmp_path: Path,
) -> None:
    """MEMORY.md is rewritten in place into its previous version and swapped in, so a write
    makes and frees no file; a reader who still has an earlier MEMORY.md open keeps reading
    that whole file (it is never overwritten under them), and a planted link as the spare
    is never written through."""
    from memdir import MemoryStore

    store = MemoryStore(tmp_path / ".memory")
    index, spare = store.index_path, store.internal / "index.spare"
    for i in range(3):
        store.write(f"note-{i}", type="project_fact", description=f"Note {i}")
    inodes = set()
    for i in range(3, 7):
        store.write(f"note-{i}", type="project_fact", description=f"Note {i}")
        inodes.add(os.stat(index).st_ino)
        assert index.read_bytes() == b"".join(store._catalog.render())
    assert len(inodes) == 2 and os.stat(spare).st_ino in inodes  # two files, taking turns

    reader = open(index, "rb")  # noqa: SIM115 - held open across writes, as a slow reader
    try:
        seen = reader.read()
        store.write("note-7", type="project_fact", description="Note 7")
        store.write("note-8", type="project_fact", description="Note 8")  # the reader's file
        reader.seek(0)
        assert reader.read() == seen  # still the whole file the reader opened
        assert b"note-8" in index.read_bytes() and b"note-8" not in seen
    finally:
        reader.close()

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    spare.unlink(missing_ok=True)  # (a refused spare is not kept)
    spare.symlink_to(victim)
    store.write("note-9", type="project_fact", description="Note 9")
    assert victim.read_text() == "keep me"
    assert index.read_bytes() == b"".join(store._catalog.render()) and not index.is_symlink()


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


def test_a_file_rewritten_from_pieces_holds_them_joined(tmp_path: Path) -> None:
    """MEMORY.md is written from its pieces without joining them: more pieces than one
    vectored write takes, empty ones among them, over a longer previous version."""
    path, spare = tmp_path / "MEMORY.md", tmp_path / "spare"
    rewrite_atomic(path, b"x" * 100_000, spare)
    rewrite_atomic(path, b"y" * 100_000, spare)  # the spare now holds a longer old version
    pieces = [f"- line {i}\n".encode() if i % 7 else b"" for i in range(2500)]
    rewrite_atomic(path, pieces, spare)
    assert path.read_bytes() == b"".join(pieces)
