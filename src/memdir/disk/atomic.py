"""Atomic file writes: readers see the old file or the new one, never a mix.

A unique temporary file in the same folder is written, fsynced and renamed over the target;
the folder is fsynced so the rename survives a power cut. Temporary files start with
``TEMP_PREFIX`` so a crashed writer's leftovers are recognised and cleaned up. No file another
process may have open is ever written in place (MEMORY.md included), and no lease is taken: a
reader holds the old file or the new one. An intent that must be durable first (the journal,
``write_intent``) is written in place in memdir's own state folder and blanked when carried
out.
This module does NOT lock: callers hold the store lock.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

TEMP_PREFIX = ".tmp-"


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()  # what open() would give; mkstemp alone gives 0600


def private(folder: Path) -> bool:
    """Whether only its owner may enter ``folder`` (the user's store): files made there are
    made owner-only too."""
    try:
        return os.stat(folder).st_mode & 0o077 == 0
    except OSError:
        return False


def write_atomic(
    path: Path,
    data: bytes,
    *,
    sync: bool = True,
    sync_folder: bool = True,
    mode: int | None = None,
    stage: Path | None = None,
) -> None:
    """Write ``data`` to ``path`` so that readers see the old or the new file, never a mix.

    ``sync=False`` skips the fsyncs, for derived files that are rebuilt when found stale;
    ``sync_folder=False`` leaves the folder's sync to the caller, who makes several renames
    in one folder durable with one ``fsync_dir``.
    ``mode``: the file's permissions (default: what ``open`` gives, or 0600 in a folder only
    its owner may enter). ``stage``: a folder on the same file system to write the temporary
    file in (so that watchers of ``path``'s folder see one rename, not a file being
    written)."""
    if mode is None:
        mode = 0o600 if private(path.parent) else FILE_MODE
    fd, tmp = tempfile.mkstemp(dir=stage or path.parent, prefix=TEMP_PREFIX, suffix=".part")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno == errno.EXDEV and stage is not None:
            # one file system reached through another mount (a bind mount): staged beside it
            write_atomic(path, data, sync=sync, sync_folder=sync_folder, mode=mode)
            return
        raise
    if sync and sync_folder:
        fsync_dir(path.parent)


def _write_over(fd: int, data: bytes) -> None:
    """Make the open file ``fd`` (memdir's own, never one a reader holds) hold exactly
    ``data``, written in place from its start."""
    view, at = memoryview(data), 0
    while at < len(view):
        at += os.pwrite(fd, view[at:], at)
    os.ftruncate(fd, len(data))


INTENT_BLOCK = 4096  # an intent is padded with blanks to whole blocks: its size rarely changes


def write_intent(path: Path, data: bytes) -> None:
    """Make ``data`` durable at ``path`` before anything it describes is done (a journal):
    written in place over the file an earlier intent left (blank once cleared) and padded with
    blanks to whole blocks, so that the file keeps its size and a write costs one fdatasync of
    data alone, and no new file; the folder is synced only when the file is new."""
    new = not os.path.lexists(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise OSError(errno.EEXIST, "not a plain file of its own", str(path))
        _write_over(fd, data + b" " * (-len(data) % INTENT_BLOCK))
        getattr(os, "fdatasync", os.fsync)(fd)  # (macOS has fsync only)
    finally:
        os.close(fd)
    if new:
        fsync_dir(path.parent)  # (a file just made: its name must survive too)


def clear_intent(path: Path) -> None:
    """The intent at ``path`` is carried out: blank it in place (the file keeps its size for
    the next one)."""
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.pwrite(fd, b" " * os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)


def intent_pending(path: Path) -> bool:
    """Whether ``path`` holds an intent not yet carried out: anything but a plain file that is
    empty or starts with a blank (a cleared intent), or none. An intent starts with ``{``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # a link or something else that is not ours: not blank
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return True
        return os.pread(fd, 1, 0) not in (b"", b" ")
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make the renames in the folder ``path`` durable where the platform can (a folder some
    file systems cannot open or sync is left as it is)."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        return


def append_nofollow(path: Path, data: bytes, *, sync: bool = False) -> None:
    """Append ``data`` to ``path`` in one write, refusing to follow a symbolic link."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
