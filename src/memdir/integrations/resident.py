"""The resident memdir: one background process per user (and environment) that answers the
hosts' hooks with its stores, indexes, embedder and model client kept warm.

Started detached by the first hook that finds none (``python -m memdir.integrations.resident``),
at a lower priority; one per socket (a lock decides), exits after ``MEMDIR_RESIDENT_IDLE``
seconds (600) without a call, when its socket is taken away, when the installed memdir
changes (an upgrade: the hooks' next calls go to a new socket and a new resident), or on
SIGTERM. It listens on a Unix socket in a folder only the user can enter (mode 0700, the socket
0600) and answers only callers of the same user (the peer's credentials, SO_PEERCRED, where the
platform has them; elsewhere the folder alone). Every call runs the same code as a hook's own
process: the configuration is read again for each call (an edited config.toml or trust list
counts at once); stores stay open between calls, each with its file watcher, so a memory edited
by hand is seen; a store whose configuration or presence changed is opened anew. The stores'
background work queued by its hooks (learn, embed, sync: ``jobs``) is done by its own worker
thread, under each store's worker lock, with the model client warm; other kinds go to the
store's detached worker.
This module does NOT decide what a hook answers (``hooks``) or how a hook reaches it
(``hookclient``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import queue
import signal
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .. import jobs
from ..config import Config
from ..hookclient import (
    RESIDENT_ENV,
    Reply,
    code_identity,
    folder,
    private,
    read_request,
    receive,
    send,
    socket_path,
)
from ..scopes import Scopes, user_store_dir
from . import hooks, race, workerjobs
from .lease import Lease

log = logging.getLogger("memdir")

IDLE = 600.0  # seconds without a call before the resident leaves
KEEP = 600.0  # seconds an unused store stays open
NICE = 5  # below the user's own work, not so far that a busy machine starves a prompt
RECHECK = 5.0  # seconds between two looks, when no call runs, at whether memdir was upgraded
BOUND = 60.0  # seconds a call may take: a resident with a call past it is stuck, and leaves
LOG = "resident.log"  # beside the sockets: each call that failed, and why
LOG_LIMIT = 1 << 20  # bytes; the log starts again past it
FINISH = 30.0  # seconds a leaving resident waits for the job at work to end


def _idle() -> float:
    try:
        return max(0.1, float(os.environ.get(RESIDENT_ENV + "_IDLE", IDLE)))
    except ValueError:
        return IDLE


class Pool:
    """Stores kept open between calls: by store folder and the configuration they were
    opened with. A lease is taken by one call at a time; a changed configuration, or a store
    folder that appeared or went, opens anew."""

    def __init__(self, keep: float = KEEP) -> None:
        self.keep = keep
        self._lock = threading.Lock()
        self._idle: dict[tuple[object, ...], list[tuple[Config, Scopes, float]]] = {}

    @staticmethod
    def _key(config: Config) -> tuple[object, ...]:
        user = user_store_dir(config)
        return (
            str(config.dir.absolute()),
            config.dir.is_dir(),
            None if user is None else user.is_dir(),
        )

    def take(self, config: Config, budget: float) -> Lease:
        key = self._key(config)
        stale: list[Scopes] = []
        found: Scopes | None = None
        with self._lock:
            kept = self._idle.get(key, [])
            for i, (cfg, _s, _) in enumerate(kept):
                if cfg == config:
                    found = kept.pop(i)[1]
                    break
            stale += self._expire()
        for scopes in stale:
            _close(scopes)
        if found is None:
            found = hooks._reader(config, budget, watch=True)
        return Lease(found, done=lambda s: self._back(key, config, s))

    def _back(self, key: tuple[object, ...], config: Config, scopes: Scopes) -> None:
        with self._lock:
            kept = self._idle.setdefault(key, [])
            old = [s for c, s, _ in kept if c != config]
            kept[:] = [(c, s, t) for c, s, t in kept if c == config][:3]
            kept.append((config, scopes, time.monotonic()))
        for s in old:
            _close(s)

    def _expire(self) -> list[Scopes]:
        """Take out what was not used for ``keep`` seconds (called with the lock held)."""
        now, gone = time.monotonic(), []
        for key, kept in list(self._idle.items()):
            gone += [s for _, s, t in kept if now - t > self.keep]
            kept[:] = [(c, s, t) for c, s, t in kept if now - t <= self.keep]
            if not kept:
                del self._idle[key]
        return gone

    def close(self) -> None:
        with self._lock:
            every = [s for kept in self._idle.values() for _, s, _ in kept]
            self._idle.clear()
        for s in every:
            _close(s)


def _close(scopes: Scopes) -> None:
    try:
        scopes.close()
    except Exception as exc:  # (any backend's own error) the others are closed all the same
        log.warning("memdir: closing the stores of %s failed: %s", scopes.config.dir, exc)


class Worker:
    """The resident's worker: one thread that takes the queues its hooks handed it, one store
    after another (each under the store's worker lock, as the detached worker takes it), and
    ends when none is left. It does the jobs ``workerjobs.job_handlers`` knows (learn, index,
    sync); another kind (an agent's hand-over) is left to the store's detached worker,
    started for it."""

    def __init__(self, where: Path) -> None:
        self.where = where  # the resident's folder: its log
        self._todo: queue.Queue[tuple[Path, Config]] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def __call__(self, state: Path, config: Config) -> None:
        """Take the queue of the store whose state folder is ``state`` (opened by
        ``config``), after the ones handed over before it."""
        self._todo.put((state, config))
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, daemon=True)
                self._thread.start()

    def busy(self) -> bool:
        """Whether it has work (a resident at work does not leave for being idle)."""
        with self._lock:
            return self._thread is not None and self._thread.is_alive()

    def finish(self, timeout: float = FINISH) -> None:
        """Take no more queues, and wait up to ``timeout`` seconds for the job at work (one
        still at work then is run again by the store's next worker)."""
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                state, config = self._todo.get(timeout=0.5)
            except queue.Empty:
                with self._lock:
                    if self._todo.empty():
                        self._thread = None
                        return
                continue
            try:
                handlers = workerjobs.job_handlers(config, by="resident")
                jobs.work(state, handlers, only=True)
                if jobs.left(state, list(handlers)):
                    jobs.start_worker(state, config.dir)
            except Exception as exc:  # this store's queue only: the next one is taken
                note_failure(self.where, f"the jobs of {config.dir}: {type(exc).__name__}: {exc}")


def peer_uid(conn: socket.socket) -> int | None:
    """The user id of the process at the other end of a Unix socket; None where the platform
    does not say (no ``SO_PEERCRED``: macOS, the BSDs), and the socket's owner-only folder,
    which only this user can enter, is what keeps others out."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    creds = conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


class Resident:
    """The listening socket, the calls in progress and the stores they share."""

    def __init__(
        self,
        path: Path,
        *,
        idle: float,
        uid: int | None = None,
        code: str | None = None,
        bound: float = BOUND,
        run: Callable[..., tuple[str, str]] = hooks.run,
    ) -> None:
        self.path = path
        self.bound = bound  # seconds a call may take before the resident counts as stuck
        self.run = run  # what answers a call (the hooks)
        self.calls: dict[int, float] = {}  # calls in progress: when each began
        self.stuck = False  # it left because a call outlived its bound
        self.idle = idle
        self.code = code  # the installed memdir's identity it started with (None: not kept)
        self.upgraded = False  # it left because that changed
        self.uid = os.getuid() if uid is None else uid
        self.pool = Pool()
        self.worker = Worker(path.parent)
        self.busy = 0
        self.last = time.monotonic()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.inode = 0  # the socket's, once listening: only that one is removed on exit

    def serve(self, listener: socket.socket) -> None:
        inode = self.inode = os.stat(self.path).st_ino
        listener.settimeout(0.5)
        looked = time.monotonic()
        while not self.stopping.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                now = time.monotonic()
                with self.lock:
                    free = self.busy == 0 and not self.worker.busy()
                    oldest = min(self.calls.values(), default=now)
                if now - oldest > self.bound:
                    self.stuck = True
                    note_failure(self.path.parent, f"a call ran past {self.bound:.0f}s; leaving")
                    break  # a hung call: the hooks run in their own processes until a new one
                quiet = free and now - self.last > self.idle
                if quiet or not _same(self.path, inode):
                    break  # idle, or the socket is gone or another's now
                if free and self.code is not None and now - looked > RECHECK:
                    looked = now
                    if code_identity() != self.code:
                        self.upgraded = True
                        break  # upgraded: no hook asks this socket any more
                continue
            except OSError:
                break
            with self.lock:
                self.busy += 1
                self.last = time.monotonic()
            threading.Thread(target=self._call, args=(conn,), daemon=True).start()

    def _call(self, conn: socket.socket) -> None:
        me = threading.get_ident()
        with self.lock:
            self.calls[me] = time.monotonic()
        try:
            with conn:
                if peer_uid(conn) not in (self.uid, None):
                    return  # another user: not a word
                conn.settimeout(30)
                request = read_request(receive(conn))
                out, err = self.run(
                    request["kind"],
                    request["host"],
                    request["event"],
                    cwd=request["cwd"],
                    stores=self.pool,
                    worker=self.worker,
                )
                send(conn, json.dumps(Reply(out=out, err=err), ensure_ascii=False).encode())
        except Exception as exc:  # the call's connection ends: the client runs the hook itself
            note_failure(self.path.parent, f"{type(exc).__name__}: {exc}")
        finally:
            with self.lock:
                self.calls.pop(me, None)
                self.busy -= 1
                self.last = time.monotonic()


def note_failure(where: Path, what: str) -> None:
    """One line in the resident's log (beside its sockets, owner-only): a failure is never
    silent, and never breaks the hook that met it."""
    log = where / LOG
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line = f"{stamp} {' '.join(what.split())}"[:4000] + "\n"
    try:
        if log.is_file() and log.stat().st_size > LOG_LIMIT:
            log.unlink()
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError:
        return  # nowhere to say it: the hook still falls back to its own process


def failures(where: Path, last: int = 5) -> list[str]:
    """The resident's last logged failures (for ``memdir doctor``)."""
    try:
        lines = (where / LOG).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return lines[-last:]


def _same(path: Path, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def warm() -> None:
    """Make the memory model's client once, off the calls' path, so that its SDK (a second
    or more to import) is loaded before the first prompt that asks the model; nothing when
    no model is configured. A failure here is met again, and said, by the calls."""
    from ..config import load_config

    try:
        race.memory_model(load_config(), None)
    except Exception as exc:  # (a provider SDK's own error, a bad configuration)
        log.warning("memdir: the memory model's client was not made ahead: %s", exc)


class _ToLog(logging.Handler):
    """memdir's warnings in this process, as lines of the resident's log."""

    def __init__(self, where: Path) -> None:
        super().__init__(logging.WARNING)
        self.where = where

    def emit(self, record: logging.LogRecord) -> None:
        note_failure(self.where, record.getMessage())


def main() -> None:
    """Run this user's resident for this environment until it is idle; exit at once when one
    already runs or the folder is not the user's own."""
    code = code_identity()
    where = Path(socket_path(code=code))
    home = Path(folder())
    try:
        home.parent.mkdir(parents=True, exist_ok=True)
        home.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return
    if not private(home, kind=stat.S_IFDIR):
        return  # someone else's folder, or open to others: never listen there
    with contextlib.suppress(OSError):
        os.nice(NICE)
    fd = os.open(where.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return  # another resident has this socket
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())  # who holds it, for people and doctor
    with contextlib.suppress(FileNotFoundError):
        where.unlink()  # a stale socket: its resident is gone (it held the lock)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(str(where))
    except OSError as exc:
        note_failure(home, f"cannot listen at {where}: {exc.strerror or exc}")
        os.close(fd)
        return
    finally:
        os.umask(old)
    listener.listen(32)
    log.addHandler(_ToLog(home))  # (its stderr goes nowhere)
    resident = Resident(where, idle=_idle(), code=code)
    threading.Thread(target=warm, name="memdir-warm", daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: resident.stopping.set())
    try:
        resident.serve(listener)
    finally:
        listener.close()
        if _same(where, resident.inode):
            with contextlib.suppress(OSError):
                where.unlink()
        if resident.upgraded:  # nobody computes this socket's name any more: its lock goes too
            with contextlib.suppress(OSError):
                where.with_suffix(".lock").unlink()
        if resident.stuck:
            os._exit(70)  # its hung call's thread and stores are left to the system
        resident.worker.finish()
        resident.pool.close()


if __name__ == "__main__":
    main()
