"""The agent's memory work beside the conversation (``MemoryWorker``): each turn's extraction
and consolidation on a thread of its own, so the person never waits for it; what is left when
the agent exits is handed over (``keep_for_later``) and finished by the user's worker
(``finish_handed_over``) or the next session (``resume_handed_over``).
This module does NOT run the conversation (``loop``)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from memdir import wings
from memdir.disk.atomic import write_atomic
from memdir.disk.layout import PENDING
from memdir.errors import MemdirError, PlanError
from memdir.gate.secrets import redact_tree
from memdir.learn.consolidate import consolidate_memories, is_due, note_turn
from memdir.learn.conversation import keep_episodes
from memdir.learn.extract import extract_memories
from memdir.providers import ChatModel, Message
from memdir.scopes import open_user_store
from memdir.store import Store

log = logging.getLogger("memdir_agent")

EventFn = Callable[[str, str], None]  # (kind, one-line text)


class Handover(TypedDict):
    """Memory work an exiting agent leaves for the next session (``<state>/pending/``)."""

    messages: list[Message]


EXIT_WAIT = 3.0  # seconds an exiting agent waits for memory work before handing it over


@dataclass
class _Job:
    label: str
    run: Callable[[], str | None]
    handover: Handover | None = None  # spooled if the process leaves before it ran


class MemoryWorker:
    """Runs memory upkeep on one background thread, one job at a time. An exiting agent waits
    a few seconds for it (``close``); work not finished by then is handed over to the next
    session through ``<state>/pending/`` (extraction is resumable; a half-applied change is
    finished from the journal when the store is next opened)."""

    def __init__(self, on_event: EventFn, spool: Path | None = None) -> None:
        self.on_event = on_event
        self.spool = spool
        self.jobs: deque[_Job] = deque()
        self.current: _Job | None = None
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._loop, name="memdir-memory", daemon=True)
        self.thread.start()

    def submit(
        self, label: str, job: Callable[[], str | None], handover: Handover | None = None
    ) -> None:
        """Queue ``job``; its returned text (if any) and any failure become one-line events."""
        with self.cond:
            self.jobs.append(_Job(label, job, handover))
            self.cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.jobs:
                    self.cond.wait()
                self.current = self.jobs.popleft()
            job = self.current
            try:
                note = job.run()
            except (MemdirError, OSError) as exc:
                self.on_event("memory_error", f"{job.label} failed: {exc}")
                note = None
            except Exception as exc:  # a bug must not kill the session; it is still reported
                log.exception("%s crashed", job.label)
                self.on_event("memory_error", f"{job.label} failed: {type(exc).__name__}: {exc}")
                note = None
            if note:
                self.on_event("memory", note)
            with self.cond:
                self.current = None
                self.cond.notify_all()

    def pending(self) -> list[str]:
        """Labels of the jobs running or queued."""
        with self.cond:
            return ([self.current.label] if self.current else []) + [j.label for j in self.jobs]

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every queued job has finished (at most ``timeout`` s); True if they did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            while self.jobs or self.current is not None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def close(self, timeout: float = EXIT_WAIT) -> list[str]:
        """Wait up to ``timeout`` s for the queued work; hand over what is left (its labels
        are returned). Ctrl-C while waiting hands it over at once."""
        try:
            if self.drain(timeout):
                return []
        except KeyboardInterrupt:
            pass
        with self.cond:
            left = ([self.current] if self.current else []) + list(self.jobs)
            self.jobs.clear()
        for job in left:
            if job.handover is not None and self.spool is not None:
                with contextlib.suppress(OSError):
                    self.spool.mkdir(exist_ok=True)
                    # the conversation waits on disk: owner-only, and never with a credential
                    write_atomic(
                        self.spool / f"{time.time_ns()}-{os.getpid()}.json",
                        json.dumps(redact_tree(job.handover), ensure_ascii=False).encode(),
                        mode=0o600,
                    )
        return [j.label for j in left]


def keep_for_later(store: Store, messages: list[Message]) -> None:
    """What the user said in a turn whose model could not be reached: kept as an episode now
    and handed over for extraction, which the next session, or the background learner, runs
    once the model answers again."""
    keep_episodes(store, messages)
    spool = store.internal / PENDING
    spool.mkdir(exist_ok=True)
    handover: Handover = {"messages": messages}
    write_atomic(
        spool / f"{time.time_ns()}-{os.getpid()}.json",
        json.dumps(redact_tree(handover), ensure_ascii=False).encode(),
        mode=0o600,
    )


def finish_handed_over(store: Store, model: ChatModel, user_root: Path | None = None) -> int:
    """Run every extraction handed over to this store now (the background learner a one-shot
    run starts as it exits); how many were taken. One that fails goes back to the spool."""
    import filelock

    spool = store.internal / PENDING
    spool.mkdir(exist_ok=True)
    events: list[str] = []
    try:
        with filelock.FileLock(str(spool / "learner.lock"), timeout=0):
            worker = MemoryWorker(lambda kind, text: events.append(f"{kind}: {text}"), None)
            taken = resume_handed_over(store, worker, model, user_root)
            worker.drain()
    except filelock.Timeout:
        return 0  # another learner is at work on this spool
    for line in events:
        log.info("%s", line)
    return taken


def resume_handed_over(
    store: Store, worker: MemoryWorker, model: ChatModel, user_root: Path | None = None
) -> int:
    """Queue the extractions an earlier agent handed over; returns how many."""
    spool = store.internal / PENDING
    try:
        files = sorted(f for f in os.listdir(spool) if f.endswith(".json"))
    except OSError:
        return 0
    for fname in files:
        taken = spool / f"{fname}.taken-{os.getpid()}"
        try:
            os.rename(spool / fname, taken)  # claim it: two agents never take the same one
            data = json.loads(taken.read_text(encoding="utf-8"))
            messages = data["messages"]
        except (OSError, ValueError, KeyError, TypeError):
            continue

        def job(
            taken: Path = taken, messages: list[Message] = messages, fname: str = fname
        ) -> str | None:
            try:
                note = extract_job(store, messages, model, user_root)()
            except BaseException:
                with contextlib.suppress(OSError):  # back in the spool: tried again later
                    os.rename(taken, spool / fname)
                raise
            taken.unlink(missing_ok=True)
            return note

        worker.submit("handed-over memory extraction", job, {"messages": messages})
    return len(files)


def extract_job(
    shared: Store, snapshot: list[Message], model: ChatModel, user_root: Path | None = None
) -> Callable[[], str | None]:
    def job() -> str | None:
        # A store object of its own: caches and the search connection are not shared with the
        # turn running on the main thread; the file lock orders the writes of both.
        store = shared.reopen()
        user = None if user_root is None else open_user_store(user_root, shared.config)
        result = extract_memories(store, snapshot, model, user_store=user, source="extract:agent")
        note_turn(store)
        notes = []
        for op, where in ((result.operation, ""), (result.user_operation, " (user)")):
            for ch in op.changes if op else []:
                notes.append(
                    f"{'updated' if ch['action'] == 'update' else 'saved'} {ch['name']}{where}"
                )
        for scoped in (store, user):  # each scope on its own; never merged across them
            if scoped is not None and is_due(scoped):
                try:
                    plan = consolidate_memories(scoped, model, automatic=True)
                except PlanError as exc:  # the model wanted too much gone: nothing changed
                    notes.append(f"consolidation refused ({exc})")
                    continue
                if not plan.is_empty():
                    notes.append(
                        f"consolidated: merged {len(plan.merges)} groups, retired"
                        f" {len(plan.retires)}"
                    )
        wings.event("learned", store, shared.config)  # (git: synced in the background)
        return ("memory " + ", ".join(notes)) if notes else None

    return job
