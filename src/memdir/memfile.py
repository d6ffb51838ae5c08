"""One memory file on disk: reading it safely (never through a link, never from a pipe or a
device, within the size limit), its identity for the store's index (size, mtime, inode) and
whether that identity is too recent to trust, and the entry it parses to.

This module does NOT look at a folder or keep a catalogue (``index`` does).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from . import memory as memfmt
from .entry import Entry
from .errors import InvalidMemory

RACY_FINE_NS = 50_000_000  # files touched this recently are not cached (mtime granularity)
RACY_COARSE_NS = 2_000_000_000


def entry_from(mem: memfmt.Memory, file: str, types: tuple[str, ...]) -> Entry:
    return Entry(
        name=mem.name,
        type=mem.type,
        description=mem.description,
        created=mem.created,
        updated=mem.updated,
        pinned=mem.pinned,
        file=file,
        warnings=tuple(memfmt.check(mem, types)),
    )


def read_memory(path: str | Path, max_bytes: int) -> memfmt.Memory:
    """Read and parse one memory file without following symlinks or blocking on a pipe;
    raise InvalidMemory."""
    return parse(read_file(path, max_bytes), os.path.basename(path))


def parse(data: bytes, fname: str) -> memfmt.Memory:
    """A memory file's bytes as the memory they hold; raise InvalidMemory."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidMemory(
            f"not UTF-8 text (byte {exc.start + 1}) — save it again as UTF-8"
        ) from None
    return memfmt.loads(text, fname, memfmt.digest_of(data))


def read_file(path: str | Path, max_bytes: int) -> bytes:
    """A memory file's bytes, read through the same handle that was checked: never through
    a symbolic link, never from a pipe or device, at most ``max_bytes``; raise InvalidMemory."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidMemory("symbolic link, not followed") from None
        raise InvalidMemory(f"cannot read the file ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidMemory("not a regular file")
        data = os.read(fd, min(st.st_size, max_bytes) + 1)  # the size it says, at most the limit
        while len(data) <= max_bytes and (more := os.read(fd, max_bytes + 1 - len(data))):
            data += more  # (it grew meanwhile)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise InvalidMemory(f"larger than the {max_bytes // 1024} KiB limit")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):  # (Windows editors' "Unicode")
        raise InvalidMemory("UTF-16 text, not UTF-8 — save it again as UTF-8")
    if b"\x00" in data:
        raise InvalidMemory("the file is binary (contains NUL bytes)")
    return data


def stat_key(st: os.stat_result) -> tuple[int, ...]:
    """A file's identity for the cache: size, modification time and inode."""
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def racy(mtime_ns: int, now_ns: int) -> bool:
    """Whether a file changed so recently that a same-size edit could keep its mtime.

    Timestamps with sub-millisecond digits come from a fine-grained filesystem, where a short
    window suffices; coarse ones (FAT, HFS+, some network mounts) need seconds.
    """
    window = RACY_COARSE_NS if mtime_ns % 1_000_000 == 0 else RACY_FINE_NS
    return now_ns - mtime_ns < window
