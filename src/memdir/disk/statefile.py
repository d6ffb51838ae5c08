"""A small JSON object on disk that several processes read and change.

Cursors of extraction, the consolidation trigger, what an endpoint was found not to support,
the trust list: each is read tolerantly (missing or damaged means empty), changed as
read-modify-write under a lock (two processes lose no update), and written atomically.
This module does NOT know what the objects hold.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from .atomic import write_atomic

State = dict[str, Any]  # a JSON object: what it holds is the caller's


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
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

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
