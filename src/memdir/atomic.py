"""Atomic file writes: readers see the old file or the new one, never a mix.

A unique temporary file in the same folder is written, fsynced and renamed over the target;
the folder is fsynced so the rename survives a power cut. Temporary files start with
``TEMP_PREFIX`` so a crashed writer's leftovers are recognised and cleaned up.
This module does NOT lock: callers hold the store lock.
"""

from __future__ import annotations

import contextlib
import os
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
