"""The agent loop: one user turn of a small coding agent with memory woven in.

Before the turn: ``load_memories`` once and ``build_system`` with the memory index. Every model
call of the turn sends a copy of the history with the memories woven into the user message that
started it; the stored history stays clean. Tools run until the model stops calling them. Then
extraction (and consolidation when due) run on a background worker, one job at a time, so the
reply is not held up; a failing memory operation is reported in one line and never breaks the
turn. This module does NOT read the terminal (``repl`` does).
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from memdir.errors import LLMError, MemdirError
from memdir.gate.safetext import one_line
from memdir.learn.conversation import keep_episodes
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
from memdir.scopes import Scopes
from memdir.store import Store
from memdir_agent.tools import Tools
from memdir_agent.worker import EventFn, MemoryWorker, extract_job

log = logging.getLogger("memdir_agent")


BASE_SYSTEM = """You are a careful coding agent working in the project folder {root}.
Use the tools to inspect and change the project: bash (runs in the project folder), read_file,
write_file, edit_file. Keep answers short; show what you did. When the user asks you to
remember something, call save_memory."""
MAX_STEPS = 40
REPLY_TOKENS = 4096  # what each of the agent's model calls may answer


@dataclass
class Turn:
    """What one user turn did."""

    text: str = ""
    recalled: list[str] = field(default_factory=list)
    block: str = ""
    tool_calls: int = 0
    interrupted: bool = False
    replies: list[Reply] = field(default_factory=list)


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
    learn from (the user's worker takes the extraction if this one exits first)."""
    if worker is None or memory_model is None:
        return
    snapshot = list(messages)
    try:  # what was said is searchable now, even if extraction runs later
        keep_episodes(store, snapshot)
    except (MemdirError, OSError) as exc:
        emit("memory_error", f"could not keep the conversation: {exc}")
    user = scopes.user_root() if scopes is not None else None
    worker.submit(
        "memory extraction",
        extract_job(store, snapshot, memory_model, user),
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
