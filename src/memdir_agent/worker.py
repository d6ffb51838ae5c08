"""The agent's memory work beside the conversation (``MemoryWorker``): each turn's extraction
and consolidation on a thread of its own, so the person never waits for it; what is left when
the agent exits, or what a turn whose model could not be reached said (``keep_for_later``),
is handed over as an ordinary job of the store's queue (kind ``handover``), which the user's
worker runs (``handover_job``) — kept for a later worker while the model stays down.
This module does NOT run the conversation (``loop``)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from memdir import jobs, wings
from memdir.config import Config
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
    """Memory work an exiting agent leaves for the user's worker (a ``handover`` job)."""

    messages: list[Message]


def hand_over(state: Path, handover: Handover, *, start: Path | None = None) -> None:
    """Queue ``handover`` as a job of the store whose state folder is ``state`` — the
    conversation redacted (the job's file is owner-only) — and, with ``start``, start the
    user's worker. OSError when the queue cannot be written."""
    jobs.enqueue(state, "handover", {"messages": redact_tree(handover["messages"])}, start=start)


EXIT_WAIT = 3.0  # seconds an exiting agent waits for memory work before handing it over


@dataclass
class _Job:
    label: str
    run: Callable[[], str | None]
    handover: Handover | None = None  # handed over if the process leaves before it ran


class MemoryWorker:
    """Runs memory upkeep on one background thread, one job at a time. An exiting agent waits
    a few seconds for it (``close``); work not finished by then goes to ``hand_over`` (a job
    of the store's queue: extraction is resumable; a half-applied change is finished from the
    journal when the store is next opened)."""

    def __init__(
        self, on_event: EventFn, hand_over: Callable[[Handover], None] | None = None
    ) -> None:
        self.on_event = on_event
        self.hand_over = hand_over
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
            if job.handover is not None and self.hand_over is not None:
                try:
                    self.hand_over(job.handover)
                except OSError as exc:  # said; the user's words are kept as an episode
                    self.on_event("memory_error", f"{job.label} could not be handed over: {exc}")
        return [j.label for j in left]


def keep_for_later(store: Store, messages: list[Message]) -> None:
    """What the user said in a turn whose model could not be reached: kept as an episode now
    and handed over for extraction, which the worker the next session starts runs (none is
    started now: the model just could not be reached)."""
    keep_episodes(store, messages)
    hand_over(store.internal, {"messages": messages})


def handover_job(config: Config) -> jobs.Handler:
    """The extraction an agent of the store ``config`` opens handed over (a ``handover``
    job); kept for a later worker while the memory model cannot be reached."""

    def run(data: jobs.Data) -> None:
        from memdir.disk.layout import USAGE
        from memdir.errors import LLMError
        from memdir.providers import make_model
        from memdir.scopes import user_store_dir
        from memdir.store import open_store

        messages = data.get("messages")
        if not isinstance(messages, list):
            raise MemdirError("a hand-over job without its conversation")
        store = open_store(config, create=False, watch=False)
        model = make_model(config, memory=True, usage_log=store.internal / USAGE)
        try:
            note = extract_job(store, messages, model, user_store_dir(config))()
        except LLMError as exc:  # the model is down: a later worker tries again
            raise jobs.Later(str(exc)) from exc
        if note:
            log.info("%s", note)

    return run


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
