"""Part of a long, CPU-bound loop done at once by a forked copy of this process on another core:
how a first open of a very large store parses its files twice as fast on two cores.

Only where forking is safe and pays: on Linux, in a process with one thread (a fork copies
no other thread, so a lock another thread held would stay held in the copy; a single thread
holds none while it forks), with at least two cores to run on. Anything else, or a child
that fails in any way, returns None and the caller does the work itself, losing only time.
The child's answer comes back through a pipe as ``marshal`` data (strings, numbers, tuples),
and the child leaves with ``os._exit``: no atexit handler, no buffered output flushed twice;
it runs none of the parent's signal handlers (a signal ends it).

This module does NOT know what the work is; the caller gives it a function.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import signal
import sys
from collections.abc import Callable
from typing import Any


def can_fork() -> bool:
    """Whether this process may fork a helper now (Linux, one thread, two cores or more)."""
    if sys.platform != "linux" or not hasattr(os, "fork"):
        return False
    try:
        return len(os.sched_getaffinity(0)) >= 2 and len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


class Child:
    """A forked helper at work; ``result`` waits for its answer."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd
        self.status: int | None = None  # its exit code, once reaped

    def result(self) -> Any | None:
        """What the work returned, or None when the child failed (the caller does it itself)."""
        chunks = []
        try:
            while chunk := os.read(self.fd, 1 << 20):
                chunks.append(chunk)
        finally:
            self._reap()
        if self.status != 0:
            return None
        try:
            return marshal.loads(b"".join(chunks))
        except (EOFError, ValueError, TypeError):
            return None

    def abandon(self) -> None:
        """Stop the child, its answer no longer wanted (the caller failed meanwhile)."""
        if self.fd >= 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self._reap()

    def _reap(self) -> None:
        os.close(self.fd)
        self.fd = -1
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:  # (reaped already: SIGCHLD ignored; the answer decides)
            self.status = 0
            return
        self.status = os.waitstatus_to_exitcode(status)


def _plain_signals() -> None:
    """In the child: none of the parent's signal handlers (its clean-up is not the child's to
    do; a signal simply ends the child, and the parent does the work itself), and no wake-up
    of the parent's event loop."""
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)


def start(work: Callable[[], Any]) -> Child | None:
    """Run ``work()`` in a forked child; None when this process should not fork (then the
    caller does the work itself)."""
    if not can_fork():
        return None
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return None
    if pid == 0:  # the child: do the work, write the answer, leave at once
        code = 1
        try:
            os.close(read_end)
            _plain_signals()
            view = memoryview(marshal.dumps(work()))
            while view:
                view = view[os.write(write_end, view) :]
            code = 0
        except BaseException:  # (any failure: the parent does the work itself)
            code = 1
        finally:
            with contextlib.suppress(BaseException):
                os.close(write_end)
            os._exit(code)
    os.close(write_end)
    return Child(pid, read_end)
