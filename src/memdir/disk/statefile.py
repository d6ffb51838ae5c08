"""Small JSON files on disk that several processes read and change.

Cursors of extraction, the consolidation trigger, what an endpoint was found not to support,
the trust list: each is read tolerantly (missing or damaged means empty), changed as
read-modify-write under a lock (two processes lose no update), and written atomically.
Logs of one JSON object per line (operations, recalls, failures, usage) are read here too,
tolerantly: a torn last line from a crash is skipped.
This module does NOT know what the objects hold.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from .atomic import append_nofollow, write_atomic

log = logging.getLogger("memdir")

State = dict[str, Any]  # a JSON object: what it holds is the caller's


def read_json(path: Path) -> State:
    """The JSON object in ``path``, or {} when the file is missing, unreadable or not an
    object."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_lines(path: Path, limit: int | None = None) -> list[State]:
    """The JSON objects of a file of one per line, oldest first (the last ``limit`` of them,
    read from the file's tail: a log grows for ever, its recent lines are what is asked);
    lines that are not an object (a torn last line from a crash, the cut first one of a
    tail) are skipped; [] when the file is missing or unreadable."""
    try:
        with open(path, "rb") as fh:
            if limit is not None:
                fh.seek(max(0, fh.seek(0, os.SEEK_END) - 4096 * (limit + 1)))
            raw = fh.read()
    except OSError:
        return []
    out = parse_lines(raw.decode("utf-8", errors="replace"))
    return out if limit is None else out[max(0, len(out) - limit) :]


def parse_lines(text: str) -> list[State]:
    """The JSON objects of ``text``, one a line, in order; a line that is not one is
    skipped."""
    out = []
    for line in text.splitlines():
        try:
            got = json.loads(line)
        except ValueError:
            continue
        if isinstance(got, dict):
            out.append(got)
    return out


def write_hint(path: Path, data: Any) -> bool:
    """Write ``data`` as JSON to a file that is only a hint (what a reader can do without: a
    cache, a note for the next process), without fsync; False when it cannot be written (a
    read-only store: the next process works it out again)."""
    try:
        write_atomic(path, json.dumps(data, ensure_ascii=False).encode(), sync=False)
    except OSError:
        return False
    return True


def append_line(path: Path, record: Mapping[str, Any]) -> bool:
    """Add ``record`` to the log ``path`` as one JSON line (never through a link); False, with
    a warning, when the log cannot be written: a log is never worth failing what it records."""
    try:
        append_nofollow(path, (json.dumps(record, ensure_ascii=False) + "\n").encode())
    except OSError as exc:
        log.warning("memdir: cannot write to %s: %s", path, exc)
        return False
    return True


class StateFile:
    """``path``: the JSON file. ``lock``: the lock its changes take (default: a lock file
    beside it); ``sync``: fsync writes (off for what is only a hint); ``mode``: permissions."""

    def __init__(
        self,
        path: Path,
        *,
        lock: Callable[[], AbstractContextManager[Any]] | None = None,
        sync: bool = True,
        mode: int | None = None,
    ) -> None:
        self.path = path
        self._lock = lock or self._file_lock
        self.sync, self.mode = sync, mode

    def _file_lock(self) -> AbstractContextManager[Any]:
        import filelock

        return filelock.FileLock(str(self.path) + ".lock", timeout=30)

    def read(self) -> State:
        """The object, or {} when the file is missing, unreadable or not an object."""
        return read_json(self.path)

    @contextlib.contextmanager
    def changing(self) -> Iterator[State]:
        """The object to change in place, read and written back under the lock."""
        with self._lock():
            state = self.read()
            yield state
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(
                self.path,
                json.dumps(state, ensure_ascii=False).encode(),
                sync=self.sync,
                mode=self.mode,
            )

    def update(self, change: Callable[[State], None]) -> State:
        """Apply ``change`` to the object under the lock; the new object."""
        with self.changing() as state:
            change(state)
        return state
