"""Atomic file writes: readers see the old file or the new one, never a mix.

A unique temporary file in the same folder is written, fsynced and renamed over the target;
the folder is fsynced so the rename survives a power cut. Temporary files start with
``TEMP_PREFIX`` so a crashed writer's leftovers are recognised and cleaned up. A large derived
file rewritten at every change (``rewrite_atomic``) is written over its previous version and
swapped in; an intent that must be durable first (the journal, ``write_intent``) is written in
place and emptied when carried out.
This module does NOT lock: callers hold the store lock.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
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
    mode: int | None = None,
    stage: Path | None = None,
) -> None:
    """Write ``data`` to ``path`` so that readers see the old or the new file, never a mix.

    ``sync=False`` skips the fsyncs, for derived files that are rebuilt when found stale.
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
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync:
        fsync_dir(path.parent)


def rewrite_atomic(
    path: Path, data: bytes | Sequence[bytes], spare: Path, *, mode: int | None = None
) -> None:
    """``write_atomic(path, data, sync=False)`` for a large derived file rewritten at every
    change (MEMORY.md): ``data`` is written in place over ``spare`` (the file's previous
    version, kept for this) and the two names are swapped in one step, so no file is made and
    none freed per write (on ext4 those cost a large file most of a millisecond). Readers
    see the old file or the new one, never a mix: the spare is overwritten only while a
    write lease proves nobody has it open (one who opened it as ``path`` before the last swap
    and reads it still). Where the system cannot swap or lease (not Linux, another file
    system), or the spare is not a plain file of ours, a new file is written instead.
    ``data`` may come in pieces, written one after the other without being joined."""
    if mode is None:
        mode = 0o600 if private(path.parent) else FILE_MODE
    swap = _exchange()
    if swap is not None and os.path.isfile(path) and not os.path.islink(path):
        try:
            if _overwrite(spare, data, mode):
                swap(spare, path)
                return
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
                _EXCHANGE[:] = [None]  # this system cannot: new files from now on
    with contextlib.suppress(OSError):
        os.unlink(spare)
    whole = data if isinstance(data, bytes) else b"".join(data)
    write_atomic(path, whole, sync=False, mode=mode, stage=spare.parent)


def _overwrite(spare: Path, data: bytes | Sequence[bytes], mode: int) -> bool:
    """Write ``data`` over ``spare`` in place (made if missing) while nobody else has it open;
    False when someone does, or it is not a plain file of ours."""
    import fcntl

    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(spare, flags, mode)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.getuid():
            return False
        try:
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EBUSY):
                return False  # a reader has it open: leave it be
            raise
        try:
            if stat.S_IMODE(st.st_mode) != mode:
                os.fchmod(fd, mode)
            _write_over(fd, data)
        finally:
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        return True
    finally:
        os.close(fd)


def _write_over(fd: int, data: bytes | Sequence[bytes]) -> None:
    """Make the open file ``fd`` hold exactly ``data`` (or its pieces, one after the other),
    written in place from its start."""
    if not isinstance(data, bytes) and not hasattr(os, "pwritev"):
        data = b"".join(data)  # (a system without vectored writes)
    pieces = [memoryview(data)] if isinstance(data, bytes) else [memoryview(b) for b in data]
    size = sum(len(p) for p in pieces)
    at, first = 0, 0
    while first < len(pieces):
        batch = pieces[first : first + _IOV_MAX]
        done = os.pwritev(fd, batch, at) if len(batch) > 1 else os.pwrite(fd, batch[0], at)
        at += done
        for piece in batch:  # drop what was written; a piece written in part keeps its rest
            if done < len(piece):
                pieces[first] = piece[done:]
                break
            done -= len(piece)
            first += 1
    os.ftruncate(fd, size)


_IOV_MAX = 1024  # pieces per pwritev call (Linux's limit)


_EXCHANGE: list[Callable[[Path, Path], None] | None] = []  # made on first use


def _exchange() -> Callable[[Path, Path], None] | None:
    """Linux's renameat2(RENAME_EXCHANGE): swap two names in one step; None elsewhere."""
    if not _EXCHANGE:
        _EXCHANGE.append(None)
        if sys.platform.startswith("linux"):
            import ctypes

            try:
                call = ctypes.CDLL(None, use_errno=True).renameat2
            except (OSError, AttributeError):
                return None
            here, exchange = -100, 2  # AT_FDCWD, RENAME_EXCHANGE

            def swap(a: Path, b: Path) -> None:
                if call(here, os.fsencode(a), here, os.fsencode(b), exchange) != 0:
                    code = ctypes.get_errno()
                    raise OSError(code, os.strerror(code), str(b))

            _EXCHANGE[0] = swap
    return _EXCHANGE[0]


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


def clear_intent(path: Path, *, empty: bool = False) -> None:
    """The intent at ``path`` is carried out: blank it in place (the file keeps its size for
    the next one); ``empty``: empty it instead (a journal earlier versions read, which take
    anything else for an intent)."""
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if empty:
            os.ftruncate(fd, 0)
        else:
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
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def append_nofollow(path: Path, data: bytes, *, sync: bool = False) -> None:
    """Append ``data`` to ``path`` in one write, refusing to follow a symbolic link."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
