"""Extraction: what in a conversation is worth remembering, as a plan of changes.

The memory model sees the part of the conversation not processed yet (a cursor per
conversation makes sure nothing is extracted twice) and the catalogue of existing memories,
and answers creates and updates. Code then makes the answer safe: names are made valid, a
create that collides with or clearly duplicates an existing memory becomes an update, an update
of a memory that does not exist becomes a create, and credentials are redacted when the plan
is applied. Updates keep the previous version in history, so ``memdir undo`` reverts them.
This module does NOT decide when to run (the agent loop and the CLI do).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from . import prompts
from .atomic import write_atomic
from .errors import InvalidName
from .history import Operation
from .memory import MAX_DESCRIPTION_CHARS, Memory, slugify, validate_name
from .plan import Put
from .providers import ChatModel, Message, complete_json
from .recall import catalogue_for, message_text
from .search import tokenize
from .store import MemoryStore

log = logging.getLogger("memdir.extract")
CURSORS = "cursors.json"
TYPE_ALIASES = {"preference": "user_preference", "user": "user_preference",
                "fact": "project_fact", "project": "project_fact", "correction": "feedback",
                "pointer": "reference", "link": "reference"}


@dataclass
class Extraction:
    """The plan an extraction produced, and the operation that applied it (if applied)."""

    changes: list[Put] = field(default_factory=list)
    operation: Operation | None = None
    dropped: list[str] = field(default_factory=list)
    new_messages: int = 0


def conversation_key(messages: list[Message]) -> str:
    """Identity of a conversation: a hash of its first message."""
    first = json.dumps(messages[0] if messages else {}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(first.encode()).hexdigest()[:16]


def _prefix_digest(messages: list[Message]) -> str:
    data = json.dumps(messages, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(data.encode()).hexdigest()


class Cursors:
    """How many messages of each conversation were already extracted (``.memdir/cursors.json``)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.path = store.internal / CURSORS
        self.data = self._read()

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def start(self, messages: list[Message]) -> int:
        """Index of the first message not yet processed (0 if the history was rewritten)."""
        rec = self.data.get(conversation_key(messages))
        if not rec or rec["count"] > len(messages):
            return 0
        if _prefix_digest(messages[: rec["count"]]) != rec["digest"]:
            return 0  # the conversation was edited or compacted: read it all again
        return int(rec["count"])

    def advance(self, messages: list[Message]) -> None:
        """Mark every message as processed; under the store lock, so that two agents
        extracting from different conversations at once do not lose each other's cursor."""
        with self.store.locked():
            self.data = self._read()
            self.data[conversation_key(messages)] = {"count": len(messages),
                                                     "digest": _prefix_digest(messages)}
            write_atomic(self.path, json.dumps(self.data).encode())


def _render(messages: list[Message], start: int, max_chars: int) -> str:
    lines = []
    if start:
        lines.append("(earlier messages were already processed; the last one, for context:)")
        lines.append(f"{messages[start - 1]['role']}: {message_text(messages[start - 1])[:500]}")
        lines.append("(new messages:)")
    for msg in messages[start:]:
        text = message_text(msg).strip()
        if text:
            lines.append(f"{msg['role']}: {text}")
    out = "\n".join(lines)
    return out if len(out) <= max_chars else "…" + out[-max_chars:]


def _duplicate_of(store: MemoryStore, item: Memory) -> str | None:
    """An existing memory this new one clearly duplicates (near-identical description)."""
    mine = set(tokenize(item.description))
    if not mine:
        return None
    for entry, _ in store.search_entries(item.description, 3):
        theirs = set(tokenize(entry.description))
        if entry.type == item.type and len(mine & theirs) / len(mine | theirs) >= 0.8:
            return entry.name
    return None


def _coerce(raw: Any, store: MemoryStore) -> tuple[str, Memory] | str:
    """(action, memory) from one item of the model's answer, or the reason it was dropped."""
    if not isinstance(raw, dict):
        return f"not an object: {raw!r:.60}"
    action = str(raw.get("action", "create")).lower()
    if action not in ("create", "update"):
        return f"unknown action {action!r}"
    text = {k: str(raw.get(k) or "").strip() for k in ("name", "type", "description", "body")}
    if not text["description"] and not text["body"]:
        return f"{text['name'] or 'an item'} has neither description nor body"
    type_ = text["type"].lower().replace(" ", "_")
    type_ = TYPE_ALIASES.get(type_, type_)
    if type_ not in store.config.types:
        type_ = "project_fact" if "project_fact" in store.config.types else store.config.types[0]
    description = " ".join((text["description"] or text["body"]).split())
    if len(description) > MAX_DESCRIPTION_CHARS:
        description = description[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"
    try:
        name = validate_name(text["name"])
    except InvalidName:
        name = slugify(text["name"] or description)
    return action, Memory(name, type_, description, text["body"] or description)


def _validate(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        items = value.get("memories")
        if isinstance(items, list):
            return items
        if "action" in value or "name" in value:
            return [value]
    raise ValueError('expected {"memories": [...]}')


def plan_extraction(store: MemoryStore, messages: list[Message], model: ChatModel,
                    start: int = 0) -> Extraction:
    """Ask the model about ``messages[start:]`` and turn its answer into a safe plan."""
    result = Extraction(new_messages=len(messages) - start)
    if start >= len(messages):
        return result
    store.refresh()
    talk = _render(messages, start, 4 * 6000)
    # Large stores: show the memories the new talk is most likely to touch (pinned included).
    entries = catalogue_for(store, talk, store.config.select_catalogue_max)
    catalogue = "\n".join(f"- {e.name} ({e.type}): {' '.join(e.description.split())}"
                          for e in entries) or "(none yet)"
    prompt = prompts.render("extract", catalogue=catalogue, types=", ".join(store.config.types),
                            conversation=talk)
    items = complete_json(model, system="You extract memories and answer in JSON.",
                          messages=[{"role": "user", "content": prompt}], purpose="extract",
                          validate=_validate)
    existing = {e.name for e in store.entries()}
    planned: dict[str, Put] = {}
    for raw in items:
        coerced = _coerce(raw, store)
        if isinstance(coerced, str):
            result.dropped.append(coerced)
            continue
        action, mem = coerced
        if action == "update" and mem.name not in existing:
            action = "create"  # the model named a memory that does not exist
        if action == "create" and mem.name not in existing:
            dup = _duplicate_of(store, mem)
            if dup is not None:
                mem = mem.replace(name=dup)
        if mem.name in existing:
            current = store.get(mem.name)
            if current.pinned:
                result.dropped.append(f"{mem.name} is pinned; not changed automatically")
                continue
            mem = mem.replace(extra=dict(current.extra))
            planned[mem.name] = Put(mem, reason="updated from conversation",
                                    expect=current.digest)
        else:
            planned[mem.name] = Put(mem, reason="extracted from conversation")
    result.changes = list(planned.values())
    for note in result.dropped:
        log.info("extract: dropped %s", note)
    return result


def extract_memories(store: MemoryStore, messages: list[Message], model: ChatModel,
                     *, apply: bool = True) -> Extraction:
    """Extract from the messages not processed yet; apply the plan and advance the cursor.

    With ``apply=False`` nothing is written and the cursor stays (a dry run).
    """
    cursors = Cursors(store)
    start = cursors.start(messages)
    result = plan_extraction(store, messages, model, start)
    if not apply:
        return result
    if result.changes:
        names = ", ".join(c.memory.name for c in result.changes)
        result.operation = store.apply(result.changes, source="extract", secrets="redact",
                                       summary=f"extracted {names}")
    cursors.advance(messages)
    return result
