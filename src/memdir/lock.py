"""The writers' lock of a store, and opening its folder.

One writer at a time holds the ``lock`` file of the store's state folder (``filelock``:
re-entrant within one object); readers never take it, but may *try* it to finish a crashed
writer's journal or repair MEMORY.md, never waiting. Opening a folder creates its state folder
(owner-only, outside the store's folder: ``layout.state_dir``), moving an earlier version's
``.memdir`` there once, and finds out whether the folder can be written at all.
This module does NOT write memories.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import ConflictError, ReadOnlyStore, StoreLocked, StoreNotFound
from .layout import INTERNAL, LOCK, state_dir

if TYPE_CHECKING:
    import filelock


def open_folder(root: Path, *, create: bool, cache_dir: Path | None) -> bool:
    """Make sure the store folder and its state folder (``layout.state_dir``, outside the
    store's folder) exist (``create``); whether the store is read-only (a shared store, whose
    caches live in ``cache_dir``; a read-only mount). The state an earlier version kept in the
    folder's ``.memdir`` is moved out once, unless it came with a repository."""
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
        take_legacy_state(root, state)
        state.mkdir(mode=0o700, exist_ok=True)
    return False


def take_legacy_state(root: Path, state: Path) -> None:
    """Move the ``.memdir`` an earlier memdir kept in the folder to ``state`` (new): history,
    the log and caches. One that git tracks came with the repository (a clone, a pull) and is
    not this machine's: it is left where it is and never read (``memdir doctor`` names it).
    One git does not track may still have come from elsewhere (an archive of a repository, a
    copied folder): its history is taken, but not its word on who wrote what (``distrust``)."""
    legacy = root / INTERNAL
    if os.path.lexists(state) or legacy.is_symlink() or not legacy.is_dir():
        return
    if legacy_tracked(root):
        return
    import filelock

    # one process moves it (the others wait, then find the state folder made)
    with filelock.FileLock(str(state) + ".moving.lock", timeout=60):
        if os.path.lexists(state) or not legacy.is_dir():
            return  # another process opening the store moved it first
        distrust(legacy)  # (before it is moved: no reader ever sees it trusted)
        try:
            os.rename(legacy, state)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            shutil.copytree(legacy, state, symlinks=True)
            shutil.rmtree(legacy)


def distrust(state: Path) -> None:
    """State found in a store's folder cannot be told from one a repository's archive or a
    copied folder planted there. Kept: history, the holds, and the log, each change it records
    kept as ``unverified:<the source it claims>`` (no one's this machine knows: a rule it wrote
    waits until the user accepts it). Set aside in ``unverified/``, never read: whatever else
    could speak for the user or act for them — acceptances, kept conversations, queued jobs
    and handed-over extractions, proposals, an unfinished journal — and the caches (rebuilt)."""

    from .layout import HELD, HISTORY, INDEX_DB, LEGACY_CACHES, LOG
    from .provenance import UNVERIFIED

    aside = state / UNTRUSTED
    caches = {*LEGACY_CACHES, *(INDEX_DB + end for end in ("", "-wal", "-shm")), LOCK}
    for entry in os.listdir(state):
        link = (state / entry).is_symlink()  # (never taken in: it points out of the folder)
        if entry in caches and not link and (state / entry).is_file():
            os.unlink(state / entry)
        elif link or entry not in (HISTORY, LOG, HELD, UNTRUSTED):
            aside.mkdir(mode=0o700, exist_ok=True)
            os.replace(state / entry, aside / entry)
    _relabel(state, lambda source: source if source.startswith(UNVERIFIED) else UNVERIFIED + source)


UNTRUSTED = "unverified"  # what a folder's state held that memdir does not take in


def reclaim(state: Path) -> tuple[list[str], list[str]]:
    """The user vouches that the state ``distrust`` found in the folder was their own
    memdir's: its log's sources are theirs again and what was set aside comes back (a link
    never does). What came back, and what stays set aside because the store has made a file
    of that name since. The caller holds the writers' lock."""

    from .layout import INDEX_STATE
    from .provenance import UNVERIFIED
    from .safetext import plural

    back: list[str] = []
    left: list[str] = []
    aside = state / UNTRUSTED

    def take(src: Path, dst: Path, shown: str) -> int:
        """Move ``src`` to ``dst`` (a folder file by file); how many files came back."""
        if src.is_symlink():
            left.append(shown)
        elif src.is_dir() and dst.is_dir() and not dst.is_symlink():
            count = sum(take(src / e, dst / e, f"{shown}/{e}") for e in sorted(os.listdir(src)))
            with contextlib.suppress(OSError):  # (emptied, unless something stayed)
                src.rmdir()
            return count
        elif os.path.lexists(dst):
            left.append(shown)
        else:
            os.replace(src, dst)
            return len(os.listdir(dst)) if dst.is_dir() else 1
        return 0

    if aside.is_dir() and not aside.is_symlink():
        for entry in sorted(os.listdir(aside)):
            if entry.endswith(".lock") or entry == INDEX_STATE:  # (made again when needed)
                os.unlink(aside / entry)
                continue
            was_dir = (aside / entry).is_dir()
            count = take(aside / entry, state / entry, entry)
            if count:
                back.append(f"{entry} ({plural(count, 'file')})" if was_dir else entry)
        with contextlib.suppress(OSError):
            aside.rmdir()
    claims = _relabel(state, lambda source: source.removeprefix(UNVERIFIED))
    if claims:
        back.append(f"who wrote {plural(claims, 'logged change')}")
    return back, left


def _relabel(state: Path, relabel: Callable[[str], str]) -> int:
    """Give every operation in the log of the state folder ``state`` the source ``relabel``
    makes of its own; how many changed. A line that is not an operation stays as it is (the
    log's reader passes over it)."""
    import json

    from .atomic import write_atomic
    from .layout import LOG

    try:
        lines = (state / LOG).read_bytes().splitlines()
    except FileNotFoundError:
        return 0
    out, changed = [], 0
    for line in lines:
        try:
            op = json.loads(line)
            source = str(op["source"])
        except (ValueError, KeyError, TypeError):
            out.append(line)
            continue
        if relabel(source) != source:
            op["source"] = relabel(source)
            line, changed = json.dumps(op, ensure_ascii=False).encode(), changed + 1
        out.append(line)
    if changed:
        write_atomic(state / LOG, b"".join(line + b"\n" for line in out))
    return changed


def legacy_tracked(root: Path) -> bool:
    """Whether git tracks anything under the folder's ``.memdir`` (it came with the
    repository). No git, or no repository: nothing is tracked."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--", INTERNAL],
            capture_output=True,
            timeout=30,
            check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and bool(out.stdout.strip(b"\0"))


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
