"""The agent loop: one user turn of a small coding agent with memory woven in.

Before the turn: ``load_memories`` once and ``build_system`` with the memory index. Every model
call of the turn sends a copy of the history with the memories woven into the user message that
started it; the stored history stays clean. Tools run until the model stops calling them. Then
extraction (and consolidation when due) run on a background worker, one job at a time, so the
reply is not held up; a failing memory operation is reported in one line and never breaks the
turn. This module does NOT read the terminal (``repl`` does).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..consolidate import consolidate_memories, is_due, note_turn
from ..errors import LLMError, MemdirError
from ..extract import extract_memories
from ..providers import ChatModel, Message, Reply, TextCallback
from ..recall import build_system, render_block, select, weave
from ..store import MemoryStore
from .tools import Tools

log = logging.getLogger("memdir.agent")
BASE_SYSTEM = """You are a careful coding agent working in the project folder {root}.
Use the tools to inspect and change the project: bash (runs in the project folder), read_file,
write_file, edit_file. Keep answers short; show what you did. When the user asks you to
remember something, call save_memory."""
MAX_STEPS = 40

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


class MemoryWorker:
    """Runs memory upkeep on one background thread: never two jobs at once, all finished before
    the process exits (``drain``)."""

    def __init__(self, on_event: EventFn) -> None:
        self.on_event = on_event
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memdir-memory")
        self.pending: list[Future[None]] = []
        self.lock = threading.Lock()

    def submit(self, label: str, job: Callable[[], str | None]) -> None:
        """Queue ``job``; its returned text (if any) and any failure become one-line events."""
        def run() -> None:
            try:
                note = job()
            except (MemdirError, OSError) as exc:
                self.on_event("memory_error", f"{label} failed: {exc}")
                return
            except Exception as exc:  # a bug must not kill the session; it is still reported
                log.exception("%s crashed", label)
                self.on_event("memory_error", f"{label} failed: {type(exc).__name__}: {exc}")
                return
            if note:
                self.on_event("memory", note)

        with self.lock:
            self.pending = [f for f in self.pending if not f.done()]
            self.pending.append(self.pool.submit(run))

    def drain(self) -> None:
        """Wait until every queued job has finished."""
        with self.lock:
            pending = list(self.pending)
        for f in pending:
            f.result()

    def close(self) -> None:
        """Finish the queued jobs and stop the thread."""
        self.drain()
        self.pool.shutdown(wait=True)


def _extract_job(root: MemoryStore, snapshot: list[Message], model: ChatModel
                 ) -> Callable[[], str | None]:
    def job() -> str | None:
        # A store object of its own: caches and the search connection are not shared with the
        # turn running on the main thread; the file lock orders the writes of both.
        store = MemoryStore(root.root, root.config)
        result = extract_memories(store, snapshot, model)
        note_turn(store)
        notes = []
        if result.operation:
            for ch in result.operation.changes:
                notes.append(f"{'updated' if ch['action'] == 'update' else 'saved'}"
                             f" {ch['name']}")
        if is_due(store):
            plan = consolidate_memories(store, model)
            if not plan.is_empty():
                notes.append(f"consolidated: merged {len(plan.merges)} groups, retired"
                             f" {len(plan.retires)}")
        return ("memory " + ", ".join(notes)) if notes else None
    return job


def agent_loop(
    messages: list[Message],
    *,
    store: MemoryStore,
    model: ChatModel,
    memory_model: ChatModel | None = None,
    tools: Tools,
    worker: MemoryWorker | None = None,
    on_text: TextCallback | None = None,
    on_event: EventFn | None = None,
    base_system: str | None = None,
) -> Turn:
    """Run one user turn; ``messages`` ends with the user's message and gets the replies."""
    emit = on_event or (lambda kind, text: None)
    turn = Turn()
    start = len(messages)
    try:
        sel = select(store, messages, memory_model, max_items=store.config.recall_max_items)
        turn.recalled = sel.names
        turn.block = render_block(store, sel.names, store.config.recall_token_budget)
        if sel.path == "search-fallback":
            emit("memory_error", f"memory selection fell back to search ({sel.note})")
    except (MemdirError, OSError) as exc:
        emit("memory_error", f"recall failed: {exc}")
    if turn.recalled and turn.block:
        emit("recalled", "recalled " + ", ".join(turn.recalled))
    system = build_system((base_system or BASE_SYSTEM).format(root=tools.root), store)

    try:
        for _ in range(MAX_STEPS):
            reply = model.complete(system=system, messages=weave(messages, turn.block),
                                   tools=tools.schemas, purpose="agent", on_text=on_text,
                                   max_tokens=4096)
            turn.replies.append(reply)
            messages.append({"role": "assistant", "content": reply.content or
                             [{"type": "text", "text": "(no reply)"}]})
            uses = reply.tool_uses
            if not uses:
                turn.text = reply.text
                break
            results: list[dict[str, Any]] = []
            for use in uses:
                turn.tool_calls += 1
                emit("tool", f"{use['name']} {_short(use.get('input', {}))}")
                result = tools.run(use["name"], use.get("input", {}))
                if result.saved:
                    emit("memory", f"memory {result.saved}")
                results.append({"type": "tool_result", "tool_use_id": use["id"],
                                "content": result.text, "is_error": result.is_error})
            messages.append({"role": "user", "content": results})
        else:
            turn.text = f"(stopped after {MAX_STEPS} tool steps)"
    except KeyboardInterrupt:
        # Keep the history valid for the next turn: no dangling tool call.
        del messages[start:]
        messages.append({"role": "assistant", "content": "(interrupted by the user)"})
        turn.interrupted = True
        return turn
    except LLMError as exc:
        del messages[start:]
        messages.append({"role": "assistant", "content": f"(the model failed: {exc})"})
        raise
    if worker is not None and memory_model is not None:
        worker.submit("memory extraction", _extract_job(store, list(messages), memory_model))
    return turn


def _short(args: Any) -> str:
    text = " ".join(str(v) for v in args.values()) if isinstance(args, dict) else str(args)
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "…"
