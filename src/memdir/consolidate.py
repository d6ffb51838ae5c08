"""Consolidation: the garbage collector of memory, as a validated plan of changes.

The memory model sees the memories (in batches of related ones when the store is large) and
answers merges and retirements. The plan is validated before anything changes: unknown names
are dropped, a memory may be in one merge or one retirement at most, a merge may not overwrite a
memory it does not merge, pinned memories are never touched, and retiring more than a share of
the store needs ``force``. Applied, it is one transaction: merged memories are written first,
then the originals move to history with the reason. Nothing is deleted for good.
This module also decides when an automatic run is due (threshold, hysteresis, cooldown).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any

from . import prompts
from .atomic import write_atomic
from .errors import InvalidName, LLMError, PlanError
from .history import Operation
from .index import Entry
from .memory import MAX_DESCRIPTION_CHARS, Memory, validate_name
from .plan import Change, Put, Remove
from .providers import ChatModel, complete_json
from .store import MemoryStore

log = logging.getLogger("memdir.consolidate")
STATE = "consolidate.json"
BODY_CHARS = 1200  # per memory in the prompt


@dataclass
class Merge:
    """Several memories become one."""

    sources: list[str]
    into: Memory


@dataclass
class Consolidation:
    """A validated consolidation plan, what was dropped from the model's answer, and the result."""

    merges: list[Merge] = field(default_factory=list)
    retires: list[tuple[str, str]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    operation: Operation | None = None
    batches: int = 0
    # digests of the memories as the model saw them: a file changed since is not overwritten
    seen: dict[str, str | None] = field(default_factory=dict)

    @property
    def changes(self) -> list[Change]:
        """The plan as store changes: merged memories first, then the removals."""
        seen = self.seen
        puts: list[Change] = [Put(m.into, reason="merged from " + ", ".join(m.sources),
                                  expect=seen.get(m.into.name)) for m in self.merges]
        removes: list[Change] = [Remove(src, reason=f"merged into {m.into.name}",
                                        expect=seen.get(src))
                                 for m in self.merges for src in m.sources if src != m.into.name]
        removes += [Remove(name, reason=f"retired: {why}", expect=seen.get(name))
                    for name, why in self.retires]
        return puts + removes

    def is_empty(self) -> bool:
        """Whether the plan changes nothing."""
        return not self.merges and not self.retires

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-able data."""
        return {"merge": [{"from": m.sources, "into": m.into.to_dict()} for m in self.merges],
                "retire": [{"name": n, "reason": r} for n, r in self.retires],
                "dropped": self.dropped,
                "operation": self.operation.id if self.operation else None}


# -- when ---------------------------------------------------------------------------------


def _state(store: MemoryStore) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((store.internal / STATE).read_text(encoding="utf-8"))
        return data
    except (OSError, ValueError):
        return {}


def _save_state(store: MemoryStore, state: dict[str, Any]) -> None:
    write_atomic(store.internal / STATE, json.dumps(state).encode())


def note_turn(store: MemoryStore) -> None:
    """Count one agent turn towards the cooldown."""
    state = _state(store)
    state["turns"] = int(state.get("turns", 0)) + 1
    _save_state(store, state)


def is_due(store: MemoryStore) -> bool:
    """Whether an automatic run is due: past the threshold, grown since the last run by a
    margin (hysteresis: a store that cannot shrink below the threshold does not trigger every
    turn), and at least the cooldown number of turns after the last run."""
    cfg = store.config
    count = len(store.entries())
    if count <= cfg.consolidate_threshold:
        return False
    state = _state(store)
    if "after" not in state:
        return True
    margin = max(5, cfg.consolidate_threshold // 10)
    return (count >= int(state["after"]) + margin
            and int(state.get("turns", 0)) >= cfg.consolidate_cooldown)


# -- what ---------------------------------------------------------------------------------


def _batches(store: MemoryStore, entries: list[Entry], size: int) -> list[list[Entry]]:
    """Groups of related memories (by search), each at most ``size``."""
    if len(entries) <= size:
        return [entries]
    left = {e.name: e for e in entries}
    groups = []
    for seed in sorted(entries, key=lambda e: e.name):
        if seed.name not in left:
            continue
        group = [left.pop(seed.name)]
        hits = store.search_entries(f"{seed.name} {seed.description}", size * 2)
        best = hits[0][1] if hits else 0.0
        for e, score in hits:
            if len(group) >= size or score < best / 2:
                break  # weak matches share only common words: not related enough
            if e.name in left:
                group.append(left.pop(e.name))
        groups.append(group)
    # Fold small groups together so each prompt has enough to compare.
    merged: list[list[Entry]] = []
    for g in sorted(groups, key=len, reverse=True):
        if merged and len(merged[-1]) + len(g) <= size:
            merged[-1].extend(g)
        else:
            merged.append(g)
    return merged


def _prompt(store: MemoryStore, batch: list[Entry], seen: dict[str, str | None]) -> str:
    parts = []
    for e in batch:
        try:
            mem = store.get(e.name)
        except LookupError:
            continue
        seen[e.name] = mem.digest
        body = mem.body
        if len(body) > BODY_CHARS:
            body = body[:BODY_CHARS] + " […]"
        parts.append(f"## {e.name}\n({e.type}, updated {e.updated or 'unknown'})"
                     f" {' '.join(e.description.split())}\n{body}")
    return prompts.render("consolidate", memories="\n\n".join(parts),
                          types=", ".join(store.config.types))


def _answer(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not ({"merge", "retire"} & value.keys()):
        raise ValueError('expected {"merge": [...], "retire": [...]}')
    for key in ("merge", "retire"):
        if not isinstance(value.get(key, []), list):
            raise ValueError(f'"{key}" must be a list')
    return value


def _memory_from(raw: Any, store: MemoryStore) -> Memory:
    if not isinstance(raw, dict):
        raise ValueError("'into' must be an object")
    name = validate_name(str(raw.get("name", "")).strip())
    type_ = str(raw.get("type", "")).strip()
    if type_ not in store.config.types:
        raise ValueError(f"unknown type {type_!r}")
    desc = " ".join(str(raw.get("description", "")).split())[:MAX_DESCRIPTION_CHARS]
    body = str(raw.get("body", "")).strip()
    if not desc or not body:
        raise ValueError("a merged memory needs a description and a body")
    return Memory(name, type_, desc, body)


def validate_plan(store: MemoryStore, answer: dict[str, Any], allowed: set[str]
                  ) -> Consolidation:
    """Turn a model answer into a plan that is safe to apply; drop (and note) what is not."""
    plan = Consolidation()
    entries = store.entries()
    pinned = {e.name for e in entries if e.pinned}
    existing = {e.name for e in entries}
    used: set[str] = set()
    for raw in answer.get("merge", []):
        try:
            sources = [validate_name(str(n)) for n in (raw.get("from") or [])]
            into = _memory_from(raw.get("into"), store)
        except (ValueError, InvalidName, AttributeError) as exc:
            plan.dropped.append(f"merge {raw!r:.80}: {exc}")
            continue
        bad = [n for n in sources if n not in allowed or n in pinned or n in used]
        sources = list(dict.fromkeys(n for n in sources if n not in bad))
        if bad:
            plan.dropped.append(f"merge: ignored {', '.join(bad)} (unknown, pinned or already"
                                " used)")
        if not sources:
            continue
        if into.name in existing and into.name not in sources:
            plan.dropped.append(f"merge into {into.name}: would overwrite a memory it does not"
                                " merge")
            continue
        if into.name in used:
            plan.dropped.append(f"merge into {into.name}: name used twice")
            continue
        used.update(sources)
        used.add(into.name)
        plan.merges.append(Merge(sources, into))
    for raw in answer.get("retire", []):
        name = str(raw.get("name", "")) if isinstance(raw, dict) else str(raw)
        reason = str(raw.get("reason", "")).strip() if isinstance(raw, dict) else ""
        if name not in allowed or name in pinned or name in used:
            plan.dropped.append(f"retire {name}: unknown, pinned or already merged")
            continue
        used.add(name)
        plan.retires.append((name, reason or "stale"))
    return plan


def consolidate_memories(store: MemoryStore, model: ChatModel, *, force: bool = False,
                         dry_run: bool = False) -> Consolidation:
    """Ask the model how to tidy the store, validate the plan, and apply it as one transaction.

    Raises PlanError (changing nothing) when the plan would retire more than the configured
    share of the store and ``force`` is not set.
    """
    cfg = store.config
    store.refresh()  # decide on the files as they are now, hand edits included
    entries = [e for e in store.entries() if not e.pinned]
    plan = Consolidation()
    for batch in _batches(store, entries, cfg.consolidate_batch):
        if len(batch) < 2:
            continue
        plan.batches += 1
        try:
            answer = complete_json(
                model, system="You consolidate memories and answer in JSON.",
                messages=[{"role": "user", "content": _prompt(store, batch, plan.seen)}],
                purpose="consolidate", validate=_answer, max_tokens=4096)
        except LLMError as exc:
            if plan.batches == 1 and len(entries) <= cfg.consolidate_batch:
                raise
            plan.dropped.append(f"a batch of {len(batch)} failed: {exc}")
            continue
        part = validate_plan(store, answer, {e.name for e in batch})
        plan.merges += part.merges
        plan.retires += part.retires
        plan.dropped += part.dropped
    for note in plan.dropped:
        log.info("consolidate: dropped %s", note)
    total = len(store.entries())
    limit = math.floor(total * cfg.consolidate_max_retire_share)
    if len(plan.retires) > limit and not force:
        raise PlanError(
            f"the plan retires {len(plan.retires)} of {total} memories, more than the"
            f" {cfg.consolidate_max_retire_share:.0%} allowed — review it with --dry-run,"
            " then rerun with --force")
    if dry_run:
        return plan
    if not plan.is_empty():
        plan.operation = store.apply(
            plan.changes, source="consolidate", secrets="redact",
            summary=f"merged {len(plan.merges)} groups, retired {len(plan.retires)}")
    # Even a run that changed nothing resets the trigger: the store must grow again first.
    _save_state(store, {"after": len(store.entries()), "turns": 0})
    return plan
