"""What a model's consolidation answer becomes: a validated plan (``Consolidation``) that is
safe to apply. Merges keep their memories' specifics and kind (``mergecheck``); unknown,
pinned or doubly used names are dropped with the reason; the reply's JSON shape.
This module does NOT ask the model or apply the plan (``consolidate`` does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InvalidMemory, InvalidName, MemdirError
from ..gate.safetext import one_line
from ..gate.secrets import redact
from ..history import Operation
from ..memory import MAX_DESCRIPTION_CHARS, Memory, safe_repr, validate_name
from ..plan import Change, Put, Remove
from ..recall import origin_label
from ..store import Store
from .mergecheck import merge_problem, retire_problem

if TYPE_CHECKING:
    from ..providers import JSONSchema


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
    last_op: str | None = None  # the newest logged operation when the run began
    operation: Operation | None = None
    proposal: str | None = None  # queued for a person (review = "ask")
    batches: int = 0  # model calls made (one per batch of related memories)
    left: list[str] = field(default_factory=list)  # seeds beyond the call budget, for next time
    started: str = ""  # when the run began: what changes after it counts for the next run
    # digests of the memories as the model saw them: a file changed since is not overwritten
    seen: dict[str, str | None] = field(default_factory=dict)

    @property
    def changes(self) -> list[Change]:
        """The plan as store changes: merged memories first, then the removals."""
        seen = self.seen
        puts: list[Change] = [
            Put(m.into, reason="merged from " + ", ".join(m.sources), expect=seen.get(m.into.name))
            for m in self.merges
        ]
        removes: list[Change] = [
            Remove(src, reason=f"merged into {m.into.name}", expect=seen.get(src))
            for m in self.merges
            for src in m.sources
            if src != m.into.name
        ]
        removes += [
            Remove(name, reason=f"retired: {why}", expect=seen.get(name))
            for name, why in self.retires
        ]
        return puts + removes

    def is_empty(self) -> bool:
        """Whether the plan changes nothing."""
        return not self.merges and not self.retires

    def to_dict(self) -> dict[str, object]:
        """The plan as JSON-able data."""
        return {
            "merge": [{"from": m.sources, "into": m.into.to_dict()} for m in self.merges],
            "retire": [{"name": n, "reason": r} for n, r in self.retires],
            "dropped": self.dropped,
            "operation": self.operation.id if self.operation else None,
        }


# -- when ---------------------------------------------------------------------------------


def _schema(types: tuple[str, ...]) -> JSONSchema:
    """The consolidation reply's shape, for endpoints that enforce a JSON schema."""
    memory = {
        "type": "object",
        "required": ["name", "type", "description", "body"],
        "properties": {
            "name": {"type": "string"},
            "type": {"type": "string", "enum": list(types)},
            "description": {"type": "string"},
            "body": {"type": "string"},
        },
    }
    return {
        "type": "object",
        "required": ["merge", "retire"],
        "properties": {
            "merge": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["from", "into"],
                    "properties": {
                        "from": {"type": "array", "items": {"type": "string"}},
                        "into": memory,
                    },
                },
            },
            "retire": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name", "reason"],
                    "properties": {"name": {"type": "string"}, "reason": {"type": "string"}},
                },
            },
        },
    }


def _answer(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not ({"merge", "retire"} & value.keys()):
        raise ValueError('expected {"merge": [...], "retire": [...]}')
    for key in ("merge", "retire"):
        if not isinstance(value.get(key, []), list):
            raise ValueError(f'"{key}" must be a list')
    return value


def _memory_from(raw: Any, store: Store) -> Memory:
    if not isinstance(raw, dict):
        raise ValueError("'into' must be an object")
    name = validate_name(str(raw.get("name", "")).strip())
    if redact(name)[1]:
        raise ValueError("the name holds what looks like a credential")
    type_ = str(raw.get("type", "")).strip()
    if type_ not in store.config.types:
        raise ValueError(f"unknown type {type_!r:.40}")
    desc = one_line(redact(str(raw.get("description", "")))[0])[:MAX_DESCRIPTION_CHARS]
    body = redact(str(raw.get("body", "")).strip())[0]  # the plan shown never holds one
    if not desc or not body:
        raise ValueError("a merged memory needs a description and a body")
    return store.check(Memory(name, type_, desc, body))


def validate_plan(
    store: Store,
    answer: dict[str, Any],
    allowed: set[str],
    *,
    recent: set[str] | None = None,
) -> Consolidation:
    """Turn a model answer into a plan that is safe to apply; drop (and note) what is not:
    every merge must keep its memories' specifics and a type they had (``mergecheck``); an
    automatic run (after a turn, nobody looking: ``recent`` says what changed since the last
    one) also never retires what was learned or edited since then nor what the person stated
    themselves."""
    plan = Consolidation()
    entries = store.entries()
    # pinned, or two versions that disagree (settled by a person: 'memdir resolve') — kept
    pinned = {e.name for e in entries if e.pinned or e.conflicted}
    existing = {e.name for e in entries}
    used: set[str] = set()
    for raw in answer.get("merge", []):
        try:
            sources = [validate_name(str(n)) for n in (raw.get("from") or [])]
            into = _memory_from(raw.get("into"), store)
        except (ValueError, InvalidName, InvalidMemory, AttributeError) as exc:
            plan.dropped.append(f"merge {safe_repr(str(raw))[:80]}: {exc}")
            continue
        bad = [n for n in sources if n not in allowed or n in pinned or n in used]
        sources = list(dict.fromkeys(n for n in sources if n not in bad))
        if bad:
            plan.dropped.append(
                f"merge: ignored {', '.join(bad)} (unknown, pinned, conflicted or already used)"
            )
        if not sources:
            continue
        if into.name in existing and into.name not in sources:
            plan.dropped.append(
                f"merge into {into.name}: would overwrite a memory it does not merge"
            )
            continue
        if into.name in used:
            plan.dropped.append(f"merge into {into.name}: name used twice")
            continue
        problem = _merge_problem(store, sources, into)
        if problem is not None:
            plan.dropped.append(f"merge of {', '.join(sources)} into {into.name}: {problem}")
            continue
        used.update(sources)
        used.add(into.name)
        plan.merges.append(Merge(sources, into))
    for raw in answer.get("retire", []):
        name = str(raw.get("name", "")) if isinstance(raw, dict) else str(raw)
        reason = str(raw.get("reason", "")).strip() if isinstance(raw, dict) else ""
        reason = one_line(redact(reason)[0])[:MAX_DESCRIPTION_CHARS]
        if name not in allowed or name in pinned or name in used:
            plan.dropped.append(
                f"retire {safe_repr(name[:60])}: unknown, pinned, conflicted or already merged"
            )
            continue
        kept = (
            retire_problem(name in recent, origin_label(store, name), name in pinned)
            if recent is not None
            else None
        )
        if kept is not None:
            plan.dropped.append(f"retire {name}: kept, {kept}")
            continue
        used.add(name)
        plan.retires.append((name, reason or "stale"))
    return plan


def _merge_problem(store: Store, sources: list[str], into: Memory) -> str | None:
    """memdir's own check of a merge (``mergecheck``): the sources as they are now."""
    try:
        return merge_problem([store.get(n) for n in sources], into)
    except MemdirError as exc:
        return f"a memory could not be read ({exc})"
