"""The review queue: with ``review = "ask"``, what memdir learns waits for a person.

Extraction, consolidation, the MCP ``remember`` tool and the agent's ``save_memory`` hand their
plans to ``land``: applied at once by default (``review = "auto"``), or kept as a proposal in
``<state>/review/<id>.json`` (secrets already redacted) until a person approves, edits or
rejects each change (``memdir review``, ``memdir ui``). An approved change is applied through
``Store.apply`` like any other write (history, log, MEMORY.md, undo); a rejection is
logged. This module does NOT decide what to learn.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict

from . import memory as memfmt
from .config import standing_kind
from .disk.atomic import write_atomic
from .disk.layout import REVIEW
from .disk.statefile import read_json
from .errors import ConflictError, InvalidMemory, MemdirError, MemoryNotFound
from .gate.decisions import accept, release
from .gate.instructions import screen as screen_instructions
from .history import Operation
from .memory import Memory
from .plan import Change, Put, Remove, new_op_id, screen
from .store import Store, readable

MODES = ("auto", "ask")


class ItemData(TypedDict):
    """One proposed change as the queue file keeps it."""

    action: str  # "put", "remove", or "hold" (a text that arrived, held back from recall)
    name: str
    text: str | None  # the proposed file (a put; a hold: the text held)
    reason: str
    state: str  # "pending", "approved", "rejected"
    before: NotRequired[int | None]  # a hold: the history version it replaced (None: new)


class ProposalData(TypedDict):
    """A proposal as the queue file keeps it."""

    id: str
    time: str
    source: str
    summary: str
    items: list[ItemData]


@dataclass
class Item:
    """One proposed change of a proposal."""

    index: int
    action: str
    name: str
    text: str | None
    reason: str
    state: str
    before: int | None = None

    @property
    def memory(self) -> Memory | None:
        return memfmt.loads(self.text) if self.text is not None else None


@dataclass
class Proposal:
    """A plan waiting for a person: where it came from and its changes."""

    id: str
    time: str
    source: str
    summary: str
    items: list[Item] = field(default_factory=list)

    @property
    def pending(self) -> list[Item]:
        return [i for i in self.items if i.state == "pending"]

    def to_dict(self) -> ProposalData:
        """The proposal as JSON-able data (as the queue file keeps it)."""
        items: list[ItemData] = []
        for i in self.items:
            item: ItemData = {
                "action": i.action, "name": i.name, "text": i.text, "reason": i.reason,
                "state": i.state,
            }  # fmt: skip
            if i.action == "hold":
                item["before"] = i.before
            items.append(item)
        return {
            "id": self.id,
            "time": self.time,
            "source": self.source,
            "summary": self.summary,
            "items": items,
        }


@dataclass(frozen=True)
class Landed:
    """What ``land`` did: applied (the operation) or queued (the proposal's id)."""

    operation: Operation | None = None
    proposal: str | None = None
    repeated: bool = False  # every change was waiting already: nothing was added
    held: tuple[str, ...] = ()  # why changes were held for a person whatever ``review`` says


def held_why(change: Change) -> str | None:
    """Why a learned change waits for a person even under ``review = "auto"``: it reads as an
    instruction planted for the agent (``instructions.screen``)."""
    if not isinstance(change, Put):
        return None
    why = screen_instructions(f"{change.memory.description}\n{change.memory.body}")
    return None if why is None else f"held: {why}"


def _folder(store: Store) -> Path:
    return store.internal / REVIEW


def land(
    store: Store,
    plan: list[Change],
    *,
    source: str,
    summary: str = "",
    secrets: str = "redact",
    ask: bool = False,
) -> Landed:
    """Apply ``plan`` now, or queue it for a person when the store says ``review = "ask"``
    (or ``ask``: the caller's own reason); a change that reads as an instruction to the
    agent is queued whatever ``review`` says."""
    if not plan:
        return Landed()
    why = {id(c): w for c in plan if (w := held_why(c)) is not None}
    if store.config.review != "ask" and not ask:
        rest = [c for c in plan if id(c) not in why]
        op = store.apply(rest, source=source, summary=summary, secrets=secrets) if rest else None
        if not why:
            return Landed(operation=op)
        held = [dataclasses.replace(c, reason=why[id(c)]) for c in plan if id(c) in why]
        queued = _queue(store, held, source=source, summary=summary, secrets=secrets)
        return dataclasses.replace(queued, operation=op, held=tuple(why.values()))
    plan = [dataclasses.replace(c, reason=why[id(c)]) if id(c) in why else c for c in plan]
    queued = _queue(store, plan, source=source, summary=summary, secrets=secrets)
    return dataclasses.replace(queued, held=tuple(why.values()))


def _queue(store: Store, plan: list[Change], *, source: str, summary: str, secrets: str) -> Landed:
    """Keep ``plan`` as a proposal for a person (one already waiting is not added twice)."""
    plan = screen(plan, secrets)  # nothing unredacted waits on disk
    items: list[ItemData] = []
    for change in plan:
        if isinstance(change, Put):
            mem = store.check(change.memory) if change.memory.type else change.memory
            items.append(
                {
                    "action": "put",
                    "name": mem.name,
                    "text": memfmt.dumps(mem),
                    "reason": change.reason,
                    "state": "pending",
                }
            )
        else:
            items.append(
                {
                    "action": "remove",
                    "name": change.name,
                    "text": None,
                    "reason": change.reason,
                    "state": "pending",
                }
            )
    waiting = [(p.id, (i.action, i.name, i.text)) for p in proposals(store) for i in p.pending]
    known = {key: pid for pid, key in waiting}
    fresh = [i for i in items if (i["action"], i["name"], i["text"]) not in known]
    if not fresh:  # proposed already (a model that repeats itself, a hook run twice)
        first = items[0]
        return Landed(
            proposal=known[(first["action"], first["name"], first["text"])], repeated=True
        )
    return Landed(proposal=propose(store, fresh, source=source, summary=summary))


def propose(store: Store, items: list[ItemData], *, source: str, summary: str) -> str:
    """Queue ``items`` (already screened) as one proposal for a person; its id."""
    pid = new_op_id()
    data: ProposalData = {
        "id": pid, "time": memfmt.now(), "source": source, "summary": summary, "items": items,
    }  # fmt: skip
    folder = _folder(store)
    folder.mkdir(exist_ok=True)
    write_atomic(folder / f"{pid}.json", json.dumps(data, ensure_ascii=False).encode())
    return pid


def _read(path: Path) -> Proposal | None:
    data = read_json(path)
    try:
        items = [Item(i, **item) for i, item in enumerate(data["items"])]
        return Proposal(data["id"], data["time"], data["source"], data["summary"], items)
    except (KeyError, TypeError):
        return None


def proposals(store: Store) -> list[Proposal]:
    """Proposals with changes still waiting, oldest first."""
    folder = _folder(store)
    if not folder.is_dir():
        return []
    out = [_read(p) for p in sorted(folder.glob("*.json"))]
    return [p for p in out if p is not None and p.pending]


def find(store: Store, pid: str) -> Proposal | None:
    """The proposal ``pid`` of ``store``; None when it has none of that id."""
    if not pid or "/" in pid or pid.startswith("."):
        return None
    return _read(_folder(store) / f"{pid}.json")


def get(store: Store, pid: str) -> Proposal:
    """One proposal; MemoryNotFound naming the fix."""
    found = find(store, pid)
    if found is None:
        raise MemoryNotFound(f"no proposal {pid!r} — 'memdir review' lists them")
    return found


def diff(store: Store, item: Item) -> str:
    """The change as a unified diff against the memory as it is now (a held arrival: what it
    changed, from the text it replaced)."""
    if item.action == "hold":
        old = store.version_text(item.name, item.before) if item.before is not None else ""
        lines = difflib.unified_diff(
            old.splitlines(keepends=True),
            (item.text or "").splitlines(keepends=True),
            f"{item.name} (before it arrived)",
            f"{item.name} (as it arrived)",
        )
        return "".join(lines)
    now = readable(store, item.name)
    before = memfmt.dumps(now) if now is not None else ""
    proposed = item.memory
    if proposed is not None and now is not None:  # what the write would keep of the file
        proposed = proposed.replace(
            created=now.created, updated=now.updated, extra={**now.extra, **proposed.extra}
        )
    after = memfmt.dumps(proposed) if proposed is not None else ""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        f"{item.name} (now)",
        f"{item.name} (proposed)",
    )
    return "".join(lines)


def decide(
    store: Store,
    pid: str,
    index: int,
    *,
    approve: bool,
    edited: Memory | None = None,
    source: str = "review",
) -> Operation | None:
    """Approve (applying it, or the person's edited version) or reject one waiting change."""
    with store.locked():
        proposal = get(store, pid)
        if not 0 <= index < len(proposal.items):
            raise MemoryNotFound(f"proposal {pid} has no change {index + 1}")
        item = proposal.items[index]
        if item.state != "pending":
            raise MemdirError(f"change {index + 1} of {pid} was {item.state} already")
        op = None
        if item.action == "hold":
            op = _decide_hold(store, proposal, item, approve, source)
        elif approve:
            change: Change
            if item.action == "remove":
                change = Remove(item.name, reason=item.reason or "approved in review")
            else:
                mem = edited or item.memory
                assert mem is not None
                change = Put(mem, reason=item.reason or "approved in review")
            op = store.apply(
                [change],
                source=f"{proposal.source}, approved",
                summary=f"approved {item.name} ({proposal.summary or proposal.source})",
                secrets="redact",
            )
        else:
            store.record(
                f"rejected {item.action} of {item.name} from {proposal.source}", source=source
            )
        _mark(store, proposal, index, "approved" if approve else "rejected")
        return op


def _decide_hold(
    store: Store, proposal: Proposal, item: Item, approve: bool, source: str
) -> Operation | None:
    """A held arrival: approved, it is recalled from now on — and a rule (a text of a standing
    kind) is the user's own, since the person approved exactly this text; one that changed
    since it was held is refused, its hold kept. Rejected, the text it replaced comes back (a
    new memory is retired), as this machine's own change."""
    if approve:
        if item.name in store and item.text is not None:
            now = store.get(item.name)
            if now.digest != memfmt.digest_of(item.text.encode()):
                raise ConflictError(
                    f"{item.name} changed since it was held — 'memdir review' shows it again"
                    " as it is now; approve that"
                )
            if standing_kind(now.type, now.pinned):
                accept(store.internal, item.name, now.digest)
        release(store.root, item.name)
        store.record(f"accepted {item.name} from {proposal.source}", source=source)
        return None
    release(store.root, item.name)
    if item.name not in store:
        return None
    if item.before is not None:
        store.restore(item.name, item.before, source=source)
    else:
        store.delete(item.name, reason=f"rejected in review ({proposal.source})", source=source)
    return store.log(limit=1)[-1]


def _mark(store: Store, proposal: Proposal, index: int, state: str) -> None:
    proposal.items[index].state = state
    path = _folder(store) / f"{proposal.id}.json"
    if not proposal.pending:
        os.unlink(path)  # all decided: what was approved is in the log and history
        return
    data = proposal.to_dict()
    write_atomic(path, json.dumps(data, ensure_ascii=False).encode())


def order_in(item: Item) -> str | None:
    """Why a proposed or held text reads as an instruction planted for an agent (None: it
    does not): such a change is approved only on its own, never with the rest of a queue or
    proposal."""
    if item.action not in ("put", "hold") or item.text is None:
        return None
    try:
        mem = item.memory
    except InvalidMemory:  # (a held arrival is any text a sync brought)
        return screen_instructions(item.text) or "it is not a readable memory"
    return None if mem is None else screen_instructions(f"{mem.description}\n{mem.body}")


def waiting(store: Store) -> int:
    """How many changes wait for a person."""
    return sum(len(p.pending) for p in proposals(store))
