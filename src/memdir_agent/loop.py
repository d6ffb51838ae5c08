"""The agent loop: one user turn of a small coding agent with memory woven in.

Before the turn: ``load_memories`` once and ``build_system`` with the memory index. Every model
call of the turn sends a copy of the history with the memories woven into the user message that
started it; the stored history stays clean. Tools run until the model stops calling them. Then
extraction (and consolidation when due) run on a background worker, one job at a time, so the
reply is not held up; a failing memory operation is reported in one line and never breaks the
turn. This module does NOT read the terminal (``repl`` does).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from memdir import wings
from memdir.disk.atomic import write_atomic
from memdir.disk.layout import PENDING
from memdir.errors import LLMError, MemdirError, PlanError
from memdir.gate.safetext import one_line
from memdir.gate.secrets import redact_tree
from memdir.learn.consolidate import consolidate_memories, is_due, note_turn
from memdir.learn.conversation import keep_episodes
from memdir.learn.extract import extract_memories
from memdir.providers import Block, ChatModel, Message, Reply, TextCallback, ToolInput
from memdir.recall import (
    build_system,
    estimate_tokens,
    log_recall,
    message_text,
    render_block,
    search_query,
    select,
    weave,
)
from memdir.scopes import Scopes, open_user_store
from memdir.store import Store
from memdir_agent.tools import Tools

log = logging.getLogger("memdir_agent")


class Handover(TypedDict):
    """Memory work an exiting agent leaves for the next session (``<state>/pending/``)."""

    messages: list[Message]


BASE_SYSTEM = """You are a careful coding agent working in the project folder {root}.
Use the tools to inspect and change the project: bash (runs in the project folder), read_file,
write_file, edit_file. Keep answers short; show what you did. When the user asks you to
remember something, call save_memory."""
MAX_STEPS = 40
REPLY_TOKENS = 4096  # what each of the agent's model calls may answer

EventFn = Callable[[str, str], None]  # (kind, one-line text)


@dataclass
class Turn:
    """What one user turn did."""

    text: str = ""
    recalled: list[str] = field(default_factory=list)
    block: str = ""
    tool_calls: int = 0
    interrupted: bool = False
    replies: list[Reply] = field(default_factory=list)


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
                note = _extract_job(store, messages, model, user_root)()
            except BaseException:
                with contextlib.suppress(OSError):  # back in the spool: tried again later
                    os.rename(taken, spool / fname)
                raise
            taken.unlink(missing_ok=True)
            return note

        worker.submit("handed-over memory extraction", job, {"messages": messages})
    return len(files)


def _extract_job(
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


def agent_loop(
    messages: list[Message],
    *,
    store: Store,
    model: ChatModel,
    memory_model: ChatModel | None = None,
    tools: Tools,
    worker: MemoryWorker | None = None,
    on_text: TextCallback | None = None,
    on_event: EventFn | None = None,
    base_system: str | None = None,
    scopes: Scopes | None = None,
    window: int | None = None,
) -> Turn:
    """Run one user turn; ``messages`` ends with the user's message and gets the replies.
    With ``scopes``, recall reads every scope and extraction writes what is about the person
    to the user's store. With ``window`` (the model's context, in tokens), a turn that cannot
    fit is refused before anything is sent: TooLong, the message taken off ``messages``."""
    emit = on_event or (lambda kind, text: None)
    turn = Turn()
    start = len(messages)
    last = messages[-1] if messages else None
    # what the user said this turn: save_memory retires what a correction of theirs replaced
    tools.said = message_text(last) if last is not None and last.get("role") == "user" else ""
    tools.heard = "\n".join(message_text(m) for m in messages if m.get("role") == "user")
    tools.unasked = 0
    reader: Store | Scopes = scopes if scopes is not None else store
    _recall(turn, reader, messages, memory_model, emit)
    system = build_system((base_system or BASE_SYSTEM).format(root=tools.root), reader)
    if window:
        _fits(messages, turn.block, system, tools, window)
    try:
        _converse(turn, messages, system, model, tools, on_text, emit)
    except KeyboardInterrupt:
        # Keep the history valid for the next turn: no dangling tool call.
        del messages[start:]
        messages.append({"role": "assistant", "content": "(interrupted by the user)"})
        turn.interrupted = True
    except LLMError as exc:
        del messages[start:]
        messages.append({"role": "assistant", "content": f"(the model failed: {exc})"})
        _learn(store, messages, worker, memory_model, scopes, emit)  # the user's words stay
        raise
    _learn(store, messages, worker, memory_model, scopes, emit)
    return turn


class TooLong(MemdirError):
    """A message the model's context cannot hold: refused before it is sent."""


def _fits(messages: list[Message], block: str, system: str, tools: Tools, window: int) -> None:
    """Raise TooLong (taking the last message off) when the request would not fit in ``window``
    tokens with room for the reply; the estimate errs on the side of sending."""
    sent = json.dumps(weave(messages, block), ensure_ascii=False) + system
    need = estimate_tokens(sent + json.dumps(tools.schemas)) + REPLY_TOKENS
    if need <= window:
        return
    last = messages.pop()
    mine = estimate_tokens(json.dumps(last.get("content", ""), ensure_ascii=False))
    raise TooLong(
        f"not sent: this turn needs about {need:,} tokens (your message about {mine:,}) and the"
        f" model takes {window:,} — shorten it, or save it to a file and ask the agent to read"
        " the part you need (/clear starts a new conversation)"
    )


def _learn(
    store: Store,
    messages: list[Message],
    worker: MemoryWorker | None,
    memory_model: ChatModel | None,
    scopes: Scopes | None,
    emit: EventFn,
) -> None:
    """Keep the turn as an episode and hand its extraction to the worker, whatever became of
    the turn: an interrupted or failed one still leaves what the user said to recall and to
    learn from (the next session picks up the extraction if this one exits first)."""
    if worker is None or memory_model is None:
        return
    snapshot = list(messages)
    try:  # what was said is searchable now, even if extraction runs next session
        keep_episodes(store, snapshot)
    except (MemdirError, OSError) as exc:
        emit("memory_error", f"could not keep the conversation: {exc}")
    user = scopes.user_root() if scopes is not None else None
    worker.submit(
        "memory extraction",
        _extract_job(store, snapshot, memory_model, user),
        {"messages": snapshot},
    )


def _recall(
    turn: Turn,
    store: Store | Scopes,
    messages: list[Message],
    memory_model: ChatModel | None,
    emit: EventFn,
) -> None:
    """Choose the turn's memories once; a failure is one notice, never the end of the turn."""
    try:
        started = time.monotonic()
        sel = select(store, messages, memory_model, max_items=store.config.recall_max_items)
        turn.recalled = sel.names
        turn.block = render_block(
            store, sel.names, store.config.recall_token_budget, episodes=sel.episodes
        )
        log_recall(
            store, sel, search_query(messages), source="agent", block=turn.block, started=started
        )
        if sel.path == "search-fallback":
            emit("memory_error", f"memory selection fell back to search ({sel.note})")
    except (MemdirError, OSError) as exc:
        emit("memory_error", f"recall failed: {exc}")
    if turn.recalled and turn.block:
        emit("recalled", "recalled " + ", ".join(turn.recalled))


def _converse(
    turn: Turn,
    messages: list[Message],
    system: str,
    model: ChatModel,
    tools: Tools,
    on_text: TextCallback | None,
    emit: EventFn,
) -> None:
    """Model and tools until the model stops calling tools (at most MAX_STEPS calls); every
    call carries the recalled memories, the stored history does not."""
    names = {t["name"] for t in tools.schemas}
    refused: dict[str, int] = {}  # refused calls by their exact arguments
    for step in range(MAX_STEPS):
        held = _HeldText(on_text) if on_text is not None else None
        reply = model.complete(
            system=system,
            messages=weave(messages, turn.block),
            tools=tools.schemas,
            purpose="agent",
            on_text=held,
            max_tokens=REPLY_TOKENS,
        )
        turn.replies.append(reply)
        content = reply.content or [{"type": "text", "text": "(no reply)"}]
        uses = reply.tool_uses
        if not uses:  # a small model may write its tool call as text: run it, do not print it
            uses = [
                {"type": "tool_use", "id": f"text_call_{step}_{i}", "name": name, "input": args}
                for i, (name, args) in enumerate(text_tool_calls(reply.text, names))
            ]
            if uses:
                content = list(uses)
        if held is not None and not uses:
            held.flush()
        messages.append({"role": "assistant", "content": content})
        if not uses:
            turn.text = reply.text
            return
        results: list[Block] = []
        for use in uses:
            turn.tool_calls += 1
            call = f"{use['name']} {_short(use.get('input', {}))}"
            emit("tool", call)
            key = json.dumps([use["name"], use.get("input", {})], sort_keys=True, default=str)
            again = refused.get(key, 0) >= REPEATS  # asked again what was refused
            if again or refused.get(use["name"], 0) >= REFUSALS:  # end the turn
                turn.text = (
                    f"(stopped: the model asked {REPEATS + 1} times for {call}, which was refused"
                    if again
                    else f"(stopped: {REFUSALS} calls of {use['name']} were refused this turn"
                ) + " — say what you want done differently, or allow it)"
                emit("refused", turn.text)
                return
            result = tools.run(use["name"], use.get("input", {}))
            if result.is_error and result.text.startswith("refused"):
                refused[key] = refused.get(key, 0) + 1
                refused[use["name"]] = refused.get(use["name"], 0) + 1  # (any arguments)
                emit("refused", result.text)  # said to the person, not only to the model
            if result.saved:
                emit("memory", f"memory {result.saved}")
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": use["id"],
                    "content": result.text,
                    "is_error": result.is_error,
                }
            )
        messages.append({"role": "user", "content": results})
    turn.text = f"(stopped after {MAX_STEPS} tool steps)"


REPEATS = 2  # a refused call asked for again this many times ends the turn
REFUSALS = 4  # and this many refused calls of one tool, whatever their arguments


def _short(args: Any) -> str:
    text = " ".join(str(v) for v in args.values()) if isinstance(args, dict) else str(args)
    text = one_line(text)
    return text if len(text) <= 60 else text[:57] + "…"


_CALL_TAG = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def text_tool_calls(text: str, names: set[str]) -> list[tuple[str, ToolInput]]:
    """Tool calls a model wrote as text instead of calling (Qwen's ``<tool_call>{…}</tool_call>``,
    or a reply that is nothing but ``{"name": …, "arguments": {…}}``), for tools it has;
    [] when the text is an answer."""
    stripped = text.strip()
    tagged = _CALL_TAG.findall(stripped)
    fenced = _FENCE.match(stripped)
    raw = tagged or [fenced.group(1) if fenced else stripped]
    calls: list[tuple[str, ToolInput]] = []
    for part in raw:
        try:
            value = json.loads(part)
        except ValueError:
            return []
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, dict) or item.get("name") not in names:
                return []
            args = item.get("arguments", item.get("parameters", item.get("input", {})))
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    return []
            if not isinstance(args, dict):
                return []
            calls.append((str(item["name"]), args))
    return calls


class _HeldText:
    """Streams a reply's text, but holds back one that may be a tool call written as text (it
    starts like JSON, a code fence or a ``<tool_call>`` tag): printed only if it turns out to
    be an answer."""

    def __init__(self, out: TextCallback) -> None:
        self.out = out
        self.mode = "deciding"  # then "passing" (an answer) or "holding" (maybe a call)
        self.text = ""

    def __call__(self, chunk: str) -> None:
        if self.mode == "passing":
            self.out(chunk)
            return
        self.text += chunk
        if self.mode == "holding":
            return
        head = self.text.lstrip()
        if not head:
            return
        if head[0] in "{[`" or (
            head[0] == "<"
            and ("<tool_call>".startswith(head[:11]) or head.startswith("<tool_call>"))
        ):
            self.mode = "holding"
            return
        self.mode = "passing"
        self.out(self.text)

    def flush(self) -> None:
        """The reply was an answer after all: print what was held."""
        if self.mode != "passing" and self.text:
            self.out(self.text)
            self.mode = "passing"
