"""How a hook call holds its stores: a ``Lease`` shared by the call's threads, from a
``StoreSource`` (opened for the call in a hook's own process; kept open between calls in the
resident). This module does NOT open stores.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Protocol

from ..config import Config
from ..scopes import Scopes


class Lease:
    """Stores a hook uses, shared by the threads of one hook call; handed back to where they
    came from when the last sharer is done (a search may outlive the answer)."""

    def __init__(self, scopes: Scopes, done: Callable[[Scopes], None] | None = None) -> None:
        self.scopes = scopes
        self._done = done
        self._users = 1
        self._lock = threading.Lock()

    def share(self) -> None:
        with self._lock:
            self._users += 1

    @contextlib.contextmanager
    def shared(self) -> Iterator[Scopes]:
        """The stores, for one more sharer until the block ends (however it ends)."""
        self.share()
        try:
            yield self.scopes
        finally:
            self.release()

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            last = self._users == 0
        if last and self._done is not None:
            self._done(self.scopes)


class StoreSource(Protocol):
    """Where a hook's stores come from: opened for the call (a hook's own process), or kept
    open between calls (the resident process)."""

    def take(self, config: Config, budget: float) -> Lease:
        """Stores for ``config`` (StoreNotFound when it has none), used by one call (its
        threads share them) until the lease is released."""
        ...
