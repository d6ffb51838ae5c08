"""A store's background work as jobs in one queue, done by one worker for all of a user's
stores.

Hooks and commands never do slow work while a person waits: they ``enqueue`` a job (learn
from a session, embed the memories not embedded yet, sync, finish what an exiting agent
handed over) and start the user's worker if none is at work. A job is one JSON file in the
store's state folder (``jobs/``), removed only once done, so a worker killed mid-job leaves
it for the next one (a job at work is renamed ``.run``; the next worker takes it first).
One worker per user (``worker.lock`` in the user's state folder, released by the system when
its process ends: ``memdir work --all``) takes the jobs of every store, one store's next job
at a time in turn, and leaves when no store has any; while it runs a store's job it holds
that store's ``worker.lock`` too, which the resident's worker thread (and a database store's
own worker, ``memdir --dir … work``) take as well. A job that fails is
logged once with its reason (``failures``, shown by ``memdir doctor``) and dropped, except
one that asks to be tried again later (``Later``), kept up to ``MAX_TRIES`` times; a job
that many workers ended at (killed, out of memory) is dropped the same way.
This module does NOT know what a job does: the command that runs the worker hands it one
function per kind.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .disk.atomic import write_atomic
from .disk.layout import FOLDER_ID, STORES, state_dir, state_home
from .disk.statefile import append_line, read_json, read_lines

log = logging.getLogger("memdir")

KINDS = ("learn", "index", "sync", "handover")
JOBS = "jobs"  # <state>/jobs/<time>-<pid>-<kind>.json
WORKER_LOCK = "worker.lock"  # in jobs/: held by the store's one worker at work
FAILURES = "jobs.jsonl"  # one line per job that failed: when, which kind, why
MAX_TRIES = 5  # times a job asking to be tried later, or one a worker ended at, is taken
ONCE = ("index", "sync")  # kinds one queued job stands for any number asked

Data = Mapping[str, object]  # what a job is given (JSON: what its kind needs to know)
Handler = Callable[[Data], None]


class Later(Exception):
    """Raised by a job that could not be done now (its model was down): it is kept and tried
    again by a later worker, up to ``MAX_TRIES`` times."""


def folder(state: Path) -> Path:
    """The queue of the store whose state folder is ``state`` (``Store.internal``)."""
    return state / JOBS


def enqueue(state: Path, kind: str, data: Data | None = None, *, start: Path | None = None) -> Path:
    """Queue a job of ``kind`` for the store whose state folder is ``state`` (one of a kind
    in ``ONCE`` is not queued twice) and, with ``start`` (the ``--dir`` that opens the store),
    start its worker unless one is at work; the job's file. OSError when the queue cannot
    be written or the worker cannot start."""
    if kind not in KINDS:
        raise ValueError(f"no job kind {kind!r}")
    jobs = folder(state)
    jobs.mkdir(parents=True, exist_ok=True, mode=0o700)
    waiting = queued(state, kind) if kind in ONCE else []  # (not one at work: it may be late)
    if waiting:
        path = waiting[0]
    else:
        path = jobs / f"{time.time_ns()}-{os.getpid()}-{kind}.json"
        body = {"kind": kind, "data": dict(data or {}), "tries": 0}
        write_atomic(path, json.dumps(body).encode(), mode=0o600)
    if start is not None:
        start_worker(state, start)
    return path


def start_worker(state: Path, where: Path) -> None:
    """Start the user's detached worker (``memdir work --all``) unless it, or this store's,
    is at work; a store whose state does not say which folder it is for (a database store's)
    gets a worker of its own (``memdir --dir where work``). OSError when it cannot start."""
    if at_work(state):
        return
    where = where.absolute()
    if (state / FOLDER_ID).is_file():
        if users_worker_at_work() or not _may_start():
            return  # (it looks at every queue again before it leaves)
        args = ["work", "--all"]
    else:
        args = ["--dir", str(where), "work"]
    subprocess.Popen(  # detached: a new session, nothing read or printed, never waited for
        [sys.executable, "-m", "memdir", *args],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=str(where.parent),
    )


def _users_lock() -> Path:
    return state_home() / WORKER_LOCK


STARTING = "worker.starting"  # in the user's state folder: a worker was just started
STARTING_FOR = 10.0  # seconds a started worker has to take its lock before another starts


def _may_start() -> bool:
    """Whether to start the user's worker: none was started in the last ``STARTING_FOR``
    seconds (one that is still starting takes every queue: a search of eight stores starts
    one process, not eight)."""
    stamp = state_home() / STARTING
    try:
        if time.time() - stamp.stat().st_mtime < STARTING_FOR:
            return False
    except FileNotFoundError:
        pass  # (none started yet)
    stamp.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    stamp.touch()
    return True


def users_worker_at_work() -> bool:
    """Whether the user's worker is at work now."""
    return _held(_users_lock())


def with_work() -> list[Path]:
    """The state folders of the user's stores with jobs waiting (or left at work)."""
    try:
        folders = sorted((state_home() / STORES).iterdir())
    except OSError:
        return []
    return [s for s in folders if not s.is_symlink() and queued(s, running=True)]


def folder_of(state: Path) -> Path | None:
    """The store folder a state folder is for, as it recorded (None: not recorded)."""
    path = read_json(state / FOLDER_ID).get("path")
    return Path(path) if isinstance(path, str) and Path(path).is_dir() else None


def work_all(handlers_for: Callable[[Path, Path], Mapping[str, Handler]]) -> int:
    """Be the user's worker: while any store has jobs waiting, run the next job of each in
    turn (``handlers_for(state, folder)``: what its jobs do), then leave; a worker that finds
    another at work leaves at once. How many jobs it ran."""
    import filelock

    _users_lock().parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = filelock.FileLock(str(_users_lock()), timeout=0)
    ran = 0
    skipped: set[Path] = set()  # stores whose folder is gone or unknown, or done for now
    tried: dict[Path, set[str]] = {}  # per store, the jobs run (one kept for later waits)
    while True:
        try:
            lock.acquire()
        except filelock.Timeout:
            return ran
        (state_home() / STARTING).unlink(missing_ok=True)  # (started: the next may start)
        try:
            while stores := [s for s in with_work() if s not in skipped]:
                for state in stores:
                    root = folder_of(state)
                    if root is None or at_work(state):
                        skipped.add(state)  # (another worker has it, or none can)
                        continue
                    done = work(
                        state,
                        handlers_for(state, root),
                        limit=1,
                        tried=tried.setdefault(state, set()),
                    )
                    if not done:
                        skipped.add(state)  # (what waits there is kept for a later worker)
                    ran += done
        finally:
            lock.release()
        if not [s for s in with_work() if s not in skipped]:  # (one queued meanwhile?)
            return ran


def index_in_background(
    root: Path, take: Callable[[Path], None] | None = None, *, start: bool = True
) -> bool:
    """Queue embedding what is not embedded yet of the folder store at ``root`` and start the
    user's worker (not with ``start`` False: background work is off), or hand its queue (the
    state folder) to ``take`` (the resident's worker); False when that could not be done
    (searches embed a little at a time then)."""
    try:
        enqueue(state_dir(root), "index", start=root if take is None and start else None)
    except OSError as exc:
        log.warning("memdir: cannot queue the background index of %s: %s", root, exc)
        return False
    if take is not None:
        take(state_dir(root))
    return True


def indexing(state: Path) -> bool:
    """Whether an index job is queued or at work for the store whose state folder is
    ``state`` (its worker embeds the backlog: a search embeds only its question)."""
    return bool(queued(state, "index", running=True))


def queued(state: Path, kind: str | None = None, *, running: bool = False) -> list[Path]:
    """The jobs waiting for the store whose state folder is ``state`` (with ``running``:
    those at work, or left at work by a worker that was killed, too, first), oldest first."""
    try:
        names = sorted(os.listdir(folder(state)))
    except OSError:
        return []
    ends = (".run", ".json") if running else (".json",)
    return [
        folder(state) / n
        for end in ends
        for n in names
        if n.endswith(end) and (kind is None or n[: -len(end)].endswith(f"-{kind}"))
    ]


def at_work(state: Path) -> bool:
    """Whether the store's worker is at work now."""
    return _held(folder(state) / WORKER_LOCK)


def _held(lock: Path) -> bool:
    """Whether a process holds the lock file ``lock`` now."""
    import filelock

    if not lock.exists():
        return False
    held = filelock.FileLock(str(lock), timeout=0)
    try:
        held.acquire()
    except (filelock.Timeout, OSError):
        return True
    held.release()
    return False


def work(
    state: Path,
    handlers: Mapping[str, Handler],
    *,
    only: bool = False,
    limit: int = 0,
    tried: set[str] | None = None,
) -> int:
    """Be the store's worker: run every queued job, oldest first, until none is left (a job
    queued meanwhile included), or ``limit`` jobs; a worker that finds another at work leaves
    at once. With ``only``, the jobs of kinds ``handlers`` has no function for are left in
    the queue (for the detached worker, ``left``). ``tried``: the jobs this worker ran already
    (one kept for later waits for another worker). How many jobs it ran."""
    import filelock

    jobs = folder(state)
    jobs.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = filelock.FileLock(str(jobs / WORKER_LOCK), timeout=0)
    ran = 0
    tried = set() if tried is None else tried

    def todo() -> list[Path]:
        return [
            j
            for j in queued(state, running=True)
            if j.stem not in tried and (not only or _kind(j) in handlers)
        ]

    while True:
        try:
            lock.acquire()
        except filelock.Timeout:
            return ran  # the worker at work takes what is queued
        try:
            while (waiting := todo()) and not (limit and ran >= limit):
                tried.add(waiting[0].stem)
                _run(state, waiting[0], handlers)
                ran += 1
        finally:
            lock.release()
        if not todo() or (limit and ran >= limit):  # (one queued meanwhile?)
            return ran


def left(state: Path, kinds: Sequence[str]) -> bool:
    """Whether jobs of other kinds than ``kinds`` wait for the store's worker."""
    return any(_kind(j) not in kinds for j in queued(state, running=True))


def _kind(job: Path) -> str:
    return job.stem.rsplit("-", 1)[-1]


def _run(state: Path, job: Path, handlers: Mapping[str, Handler]) -> None:
    left_at_work = job.suffix == ".run"  # a worker ended while at it
    if not left_at_work:
        at_work = job.with_suffix(".run")
        os.replace(job, at_work)  # (a later request of its kind is queued anew)
        job = at_work
    try:
        body = json.loads(_read(job))
        kind, data, tries = body["kind"], body["data"], int(body.get("tries", 0))
        ended = int(body.get("ended", 0)) + left_at_work
        if kind != _kind(job):  # the file's name says what it is: its body may not change it
            raise ValueError(f"its body names a {kind!r} job")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _failed(state, "?", f"unreadable job {job.name}: {exc}")
        job.unlink(missing_ok=True)
        return
    if left_at_work:  # a job that ends every worker taking it is not taken for ever
        if ended >= MAX_TRIES:
            _failed(state, kind, f"the worker ended while at this job {ended} times")
            job.unlink(missing_ok=True)
            return
        write_atomic(job, json.dumps({**body, "ended": ended}).encode(), mode=0o600)
    handler = handlers.get(kind)
    try:
        if handler is None:
            raise ValueError(f"no worker for jobs of kind {kind!r}")
        handler(data)
    except Later as exc:
        if tries + 1 < MAX_TRIES:
            write_atomic(
                job.with_suffix(".json"),
                json.dumps({**body, "tries": tries + 1}).encode(),
                mode=0o600,
            )
            job.unlink(missing_ok=True)
            return
        _failed(state, kind, f"{exc} (tried {MAX_TRIES} times)")
    except Exception as exc:  # the worker's boundary: logged once, and the next job runs
        _failed(state, kind, f"{type(exc).__name__}: {exc}")
    job.unlink(missing_ok=True)


MAX_JOB_BYTES = 1024 * 1024


def _read(job: Path) -> str:
    """A job file's text: a regular file, never followed through a link, never a pipe (which
    would block the worker for ever), at most ``MAX_JOB_BYTES``; OSError or ValueError."""
    fd = os.open(job, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        data = fh.read(MAX_JOB_BYTES + 1)
    if len(data) > MAX_JOB_BYTES:
        raise ValueError(f"over {MAX_JOB_BYTES} bytes")
    return data.decode("utf-8")


def _failed(state: Path, kind: str, why: str) -> None:
    log.warning("memdir: a %s job failed: %s", kind, why)
    line = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "kind": kind, "error": why}
    append_line(state / FAILURES, line)


def failures(state: Path, limit: int = 5) -> list[dict[str, str]]:
    """The last jobs that failed for the store whose state folder is ``state``, newest
    last."""
    return [{str(k): str(v) for k, v in got.items()} for got in read_lines(state / FAILURES, limit)]
