"""The writers' lock of a store, and opening its folder.

One writer at a time holds the ``lock`` file of the store's state folder (``filelock``:
re-entrant within one object); readers never take it, but may *try* it to finish a crashed
writer's journal or repair MEMORY.md, never waiting. Opening a folder creates its state folder
(owner-only, outside the store's folder: ``layout.state_dir``) and finds out whether the
folder can be written at all.
This module does NOT write memories.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConflictError, ReadOnlyStore, StoreLocked, StoreNotFound
from .layout import LOCK, state_dir
from .statefile import read_json, read_lines

if TYPE_CHECKING:
    import filelock


def open_folder(root: Path, *, create: bool, cache_dir: Path | None) -> bool:
    """Make sure the store folder and its state folder (``layout.state_dir``, outside the
    store's folder) exist (``create``); whether the store is read-only (a shared store, whose
    caches live in ``cache_dir``; a read-only mount). A ``.memdir`` in the folder is not
    memdir's state and is never read (``memdir doctor`` names it)."""
    if root.is_symlink():
        raise ConflictError(f"{root} is a symbolic link — point memdir at the real folder")
    if not root.is_dir():
        if not create:
            raise StoreNotFound(
                f"no memory store at {root} — run 'memdir init' there, or pass --dir"
            )
        root.mkdir(parents=True, exist_ok=True)
    if cache_dir is not None:
        cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        return True
    if not os.access(root, os.W_OK):
        return True  # a read-only mount or a checked-in store: reads work
    state = state_dir(root)
    not_a_link(state, "folder")
    if not state.is_dir():
        state.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        owned(state.parent)
        carry_moved(root, state)
        if not state.is_dir() and _alias(root, state):
            state = state_dir(root)
        state.mkdir(mode=0o700, exist_ok=True)
    owned(state.parent)
    owned(state)
    note_folder(root, state)
    return False


def _alias(root: Path, state: Path) -> bool:
    """Whether ``root`` is a folder memdir keeps state for under another path that still
    reaches it (a bind mount, a second mount of one file system): then this path's state is
    that one (``layout.ALIAS``), so that one lock, one history and one index keep the folder
    whichever path a writer took."""
    from .atomic import write_atomic
    from .layout import ALIAS

    for other, reached in _states_of(root, state.parent):
        if reached:
            alias = state.with_name(state.name + ALIAS)
            write_atomic(alias, other.name.encode(), sync=False, mode=0o600)
            return True
    return False


def _states_of(root: Path, stores: Path) -> Iterator[tuple[Path, bool]]:
    """The state folders in ``stores`` (none a link) recorded for the folder ``root`` is (the
    same device and inode), each with whether its recorded path still reaches that folder."""
    from .layout import FOLDER_ID

    st = os.stat(root)
    for other in sorted(stores.iterdir()):
        rec = read_json(other / FOLDER_ID)
        if (rec.get("dev"), rec.get("ino")) != (st.st_dev, st.st_ino) or other.is_symlink():
            continue  # another folder's state, or none's
        yield other, _reaches(rec.get("path"), st)


def _reaches(path: object, st: os.stat_result) -> bool:
    """Whether ``path`` (as a state folder recorded it) reaches the folder whose status is
    ``st``."""
    if not isinstance(path, str) or not os.path.exists(path):
        return False
    there = os.stat(path)
    return (there.st_dev, there.st_ino) == (st.st_dev, st.st_ino)


def owned(folder: Path) -> None:
    """ConflictError unless ``folder`` (memdir's state) is the user's own and nobody else may
    write in it: state another user made or may change (a shared ``XDG_STATE_HOME``) could
    give this user's stores forged decisions, conversations and jobs."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:  # (Windows: no owner ids; a user's profile folder is theirs)
        return
    st = os.stat(folder)
    if st.st_uid != getuid():
        raise ConflictError(
            f"memdir's state folder {folder} belongs to another user (uid {st.st_uid}) — set"
            " XDG_STATE_HOME to a folder of your own"
        )
    if st.st_mode & 0o022:
        raise ConflictError(
            f"memdir's state folder {folder} may be written by other users — 'chmod go-w"
            f" {folder}', or set XDG_STATE_HOME to a folder of your own"
        )


def note_folder(root: Path, state: Path) -> None:
    """Record which folder ``state`` belongs to (its device and inode, and its path) so that
    the folder, renamed or moved, finds its state again."""
    import json

    from .atomic import write_atomic
    from .layout import FOLDER_ID

    st = os.stat(root)
    mine = {"dev": st.st_dev, "ino": st.st_ino, "path": os.path.realpath(root)}
    rec = read_json(state / FOLDER_ID)
    if rec == mine:
        return
    if (rec.get("dev"), rec.get("ino")) == (st.st_dev, st.st_ino) and _reaches(rec.get("path"), st):
        return  # the folder by its first path, which still reaches it: kept as it is
    write_atomic(state / FOLDER_ID, json.dumps(mine).encode(), sync=False, mode=0o600)


def carry_moved(root: Path, state: Path) -> None:
    """A store folder renamed or moved (``mv proj proj2``) takes its state along: the state
    folder of the same folder (the same device and inode, which a clone or a copy never has)
    whose recorded path no longer is that folder, and whose log wrote a text this folder
    holds, becomes ``state``. Another folder that reuses the inode of a deleted one holds
    none of its texts, and gets nothing."""
    import filelock

    from .layout import LOG

    with filelock.FileLock(str(state.parent / "moving.lock"), timeout=60):
        if os.path.lexists(state):
            return  # another process opening the store made it first
        for other, reached in _states_of(root, state.parent):
            if reached:
                continue  # the same folder, still there by that path too: not a move
            if not _wrote_a_text_here(other / LOG, root):
                continue
            os.rename(other, state)
            return


def _wrote_a_text_here(log: Path, root: Path) -> bool:
    """Whether the log ``log`` wrote a text one of ``root``'s memory files holds now."""
    import hashlib

    written = {
        c.get("digest")
        for rec in read_lines(log, 500)
        if isinstance(rec.get("changes"), list)
        for c in rec["changes"]
        if isinstance(c, dict)
    }
    files = [p for p in sorted(root.glob("*.md"))[:500] if p.name != "MEMORY.md"]
    return any(
        p.is_file() and not p.is_symlink() and hashlib.sha256(p.read_bytes()).hexdigest() in written
        for p in files
    )


class WritersLock:
    """The lock of the store whose internal folder is ``internal``."""

    def __init__(self, root: Path, internal: Path, timeout: float, read_only: bool) -> None:
        self.root, self.internal, self.timeout, self.read_only = root, internal, timeout, read_only
        self._lock: filelock.FileLock | None = None

    @property
    def holding(self) -> bool:
        """Whether this object holds the lock now (an operation of its own is at work)."""
        return self._lock is not None and self._lock.is_locked

    def _filelock(self) -> filelock.FileLock:
        if self._lock is None:
            import filelock

            path = self.internal / LOCK
            not_a_link(path, "file")
            self._lock = filelock.FileLock(str(path), timeout=self.timeout)
        return self._lock

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lock; StoreLocked after the timeout, ReadOnlyStore if it cannot be."""
        import filelock

        if self.read_only:
            raise ReadOnlyStore(
                f"the store at {self.root} is read-only — memdir can read it but not change it"
            )
        not_a_link(self.internal / LOCK, "file")
        try:
            with self._filelock():
                yield
        except filelock.Timeout:
            raise StoreLocked(
                f"another memdir process has held {self.internal / LOCK} for over"
                f" {self.timeout:.0f}s — wait for it to finish or stop it"
            ) from None

    def try_run(self, fn: Callable[[], None]) -> bool:
        """Run ``fn`` holding the lock if it is free right now; never wait."""
        if self.read_only:
            return False
        import filelock

        try:
            lock = self._filelock()
            lock.acquire(timeout=0)
        except (filelock.Timeout, ConflictError, OSError):
            return False
        try:
            fn()
        finally:
            lock.release()
        return True


def not_a_link(path: Path, what: str) -> None:
    """Refuse to work through a symbolic link planted inside the store."""
    if path.is_symlink():
        raise ConflictError(
            f"{path} is a symbolic link — memdir reads and writes only inside the store;"
            f" replace it with a real {what} (see 'memdir doctor')"
        )
