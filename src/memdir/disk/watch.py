"""Noticing what changed in a store folder since a process last looked, without a sweep.

Three sources, each cheap on the read path:

- **memdir's own writes, from any process**: every operation is one line of the operation log
  naming the files it wrote. One ``stat`` of the log tells whether it grew; the new lines say
  which files to look at again.
- **files created, deleted or renamed by hand**: they change the folder's modification time.
  Each logged operation records the folder's time just after memdir wrote, so a folder time
  that no operation explains means a listing is due (names only, no ``stat`` of every file).
- **files edited in place by hand**: they change neither. A long-running process (one that
  reads again more than ``WATCH_AFTER`` seconds after it opened the store) starts a file-system
  watcher (the ``watchdog`` library: inotify, FSEvents, ReadDirectoryChangesW) that reports the
  edited files within a second. Where no watcher can start, a sweep runs at most once a second.

A new process always sweeps once when it opens the store, so it sees everything.
This module does NOT parse memory files or keep the catalogue: it only says where to look.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .atomic import TEMP_PREFIX, intent_pending

log = logging.getLogger("memdir.disk.watch")

WATCH_AFTER = 1.0  # seconds after opening: a process still reading then is long-running
SWEEP_EVERY = 1.0  # without a watcher, the longest an in-place edit can go unseen


@dataclass
class Changes:
    """Where to look again: files memdir logged, other files, every name, or everything."""

    logged: set[str] = field(default_factory=set)  # written by memdir (MEMORY.md follows)
    files: set[str] = field(default_factory=set)  # seen changing by the watcher
    names: bool = False
    full: bool = False

    def __bool__(self) -> bool:
        return bool(self.logged or self.files or self.names or self.full)


class Tracker:
    """Follows the operation log, the folder's time and (when started) a watcher."""

    def __init__(
        self,
        root: Path,
        log_path: Path,
        journals: Sequence[Path],
        *,
        watch: bool | None = None,
    ) -> None:
        self.root = root
        self.log_path = log_path
        self.journals = list(journals)  # where a writer at work has its intent
        self.watch = watch  # True: at once; None: when the process proves long-running
        self.opened = time.monotonic()
        self.last_sweep = self.opened
        self._log_id: tuple[int, int] = (0, 0)  # (inode, bytes consumed)
        self._root_mtime = 0
        self._explained_mtime = -1
        self._watcher: _Watcher | None = None
        self._watch_failed = False
        self._heard: set[str] = set()  # files the watcher named while a writer was at work

    def mark(self) -> None:
        """Remember the log and folder as they are now (call just before a sweep)."""
        self._log_id = _status(self.log_path)[:2]
        self._root_mtime = _status(self.root)[2]
        self.last_sweep = time.monotonic()
        if self.watch and self._watcher is None:
            self._start_watcher()

    def swept(self) -> None:
        """A sweep just ended: a long first sweep does not make the process long-running."""
        if self._watcher is None:
            self.opened = time.monotonic()

    def acknowledge(self, log_size: int, root_mtime: int) -> None:
        """This process appended to the log itself and knows what it wrote."""
        self._log_id = (self._log_id[0] or _status(self.log_path)[0], log_size)
        self._root_mtime = root_mtime
        self._explained_mtime = root_mtime

    def poll(self) -> Changes:
        """What changed since the last poll (or mark)."""
        out = Changes()
        self._read_log(out)
        if (
            self._watcher is None
            and not self._watch_failed
            and self.watch is not False
            and (self.watch or time.monotonic() - self.opened >= WATCH_AFTER)
        ):
            self._start_watcher()
            out.full = True  # one sweep covers the time before the watcher ran
        if self._watcher is not None:
            files, overflow = self._watcher.drain()
            # memdir's own writes, from any process, are named by the log: only what it does
            # not explain is a hand edit. While a writer is at work its line is yet to come.
            heard = (self._heard | files) - out.logged
            if self._writing():
                self._heard = heard
            else:
                self._heard = set()
                out.files |= heard
            out.full = out.full or overflow
        else:
            now = _status(self.root)[2]
            if now != self._root_mtime and (now == self._explained_mtime or not self._writing()):
                # (while a writer is at work, its log line will explain the time: wait for it)
                out.names = now != self._explained_mtime
                self._root_mtime = now
            if self._watch_failed and time.monotonic() - self.last_sweep >= SWEEP_EVERY:
                out.full = True
        if out.full:
            self.last_sweep = time.monotonic()
        return out

    def _writing(self) -> bool:
        """Whether a writer is at work (its journal holds an intent)."""
        return any(intent_pending(path) for path in self.journals)

    def _read_log(self, out: Changes) -> None:
        inode, size, _ = _status(self.log_path)
        known_inode, pos = self._log_id
        if (inode, size) == (known_inode, pos):
            return
        if (inode != known_inode and known_inode != 0) or size < pos:
            out.full = True  # the log was replaced or cut: look at everything
            self._log_id = (inode, size)
            return
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(pos)
                data = fh.read(size - pos)
        except OSError:
            out.full = True
            return
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        self._log_id = (inode, pos + end)
        for line in data[:end].splitlines():
            try:
                op: dict[str, Any] = json.loads(line)
                for ch in op.get("changes", []):
                    out.logged.add(ch.get("file") or f"{ch['name']}.md")
                if isinstance(op.get("root_mtime"), int):
                    self._explained_mtime = op["root_mtime"]
            except (ValueError, TypeError, KeyError, AttributeError):
                out.full = True

    def _start_watcher(self) -> None:
        try:
            self._watcher = _Watcher(self.root)
        except Exception as exc:  # any failure means: no watcher, sweep instead
            self._watch_failed = True
            log.info(
                "no file-system watcher for %s (%s); sweeping at most every %ss",
                self.root,
                exc,
                SWEEP_EVERY,
            )

    @property
    def watching(self) -> bool:
        """Whether a file-system watcher reports hand edits."""
        return self._watcher is not None

    def close(self) -> None:
        """Stop the watcher, if one runs."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None


class _Watcher:
    """A watchdog observer on the store folder (not its subfolders) collecting file names."""

    def __init__(self, root: Path) -> None:
        from watchdog.events import (
            FileClosedEvent,
            FileCreatedEvent,
            FileDeletedEvent,
            FileMovedEvent,
            FileSystemEvent,
            FileSystemEventHandler,
        )
        from watchdog.observers import Observer

        self._lock = threading.Lock()
        self._files: set[str] = set()
        self._overflow = False
        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                if event.event_type not in _CHANGES:
                    return  # opened, read, closed without writing: memdir's own reads
                paths = [event.src_path, getattr(event, "dest_path", "")]
                with watcher._lock:
                    for p in paths:
                        name = os.path.basename(os.fsdecode(p)) if p else ""
                        if name.startswith(TEMP_PREFIX):
                            continue  # a writer's temporary file: its rename is what counts
                        if name:
                            watcher._files.add(name)
                        elif p:
                            watcher._overflow = True

        self._observer = Observer()
        self._observer.daemon = True
        # only what changes a file: every other process's reads (open, close-without-write)
        # would otherwise wake this one for each file they read
        self._observer.schedule(
            Handler(),
            str(root),
            recursive=False,
            event_filter=[FileCreatedEvent, FileDeletedEvent, FileMovedEvent, FileClosedEvent],
        )
        self._observer.start()

    def drain(self) -> tuple[set[str], bool]:
        with self._lock:
            files, overflow = self._files, self._overflow
            self._files, self._overflow = set(), False
        return files, overflow

    def stop(self) -> None:
        self._observer.stop()


_CHANGES = {"created", "deleted", "modified", "moved", "closed"}


def _status(path: Path) -> tuple[int, int, int]:
    """``path``'s inode, size and modification time (nanoseconds); zeros when it is gone."""
    try:
        st = os.lstat(path)
    except OSError:
        return (0, 0, 0)
    return (st.st_ino, st.st_size, st.st_mtime_ns)
