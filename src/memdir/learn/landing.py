"""How an extraction's items land in the store (``Planner``): one standing rule per
convention's slot (a new value replaces exactly the rule of its slot), corrections that retire
what they replace, the user's and the project's scope, a name for what the model left
unnamed, and what was just learned in this conversation told apart from older memories.
This module does NOT ask the model (``extract``) and does NOT write (the plan it makes is
applied by ``review.land``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..code import conventions
from ..config import STANDING_TYPES
from ..errors import InvalidMemory, InvalidName
from ..find.search import tokenize
from ..history import Operation
from ..memory import Memory, skeleton
from ..plan import Put, Remove
from ..store import Store, origin_of, readable
from .proposal import (
    borrowed_description,
    coerce,
    corrected,
    in_users_language,
    short_name,
    stale_by_correction,
)


@dataclass
class Extraction:
    """The plan an extraction produced, and the operation that applied it (if applied)."""

    changes: list[Put] = field(default_factory=list)
    operation: Operation | None = None
    # memories a correction replaces besides the one it updates (retired in the same operation)
    retired: list[Remove] = field(default_factory=list)
    user_changes: list[Put] = field(default_factory=list)  # for the user's store, if given
    user_retired: list[Remove] = field(default_factory=list)
    user_operation: Operation | None = None
    proposals: list[str] = field(default_factory=list)  # queued for a person (review = "ask")
    dropped: list[str] = field(default_factory=list)
    new_messages: int = 0


_GENERIC = frozenset(
    tokenize(
        "user users assistant prefer prefers want wants fact facts project people remember memory"
    )
)


def grounded(fact: str, heard: set[str]) -> bool:
    """Whether most of a fact's informative words occur in the conversation (a small model
    otherwise copies the prompt's own examples as facts)."""
    words = [w for w in tokenize(fact) if w not in _GENERIC]
    return bool(words) and sum(w in heard for w in words) >= 0.5 * len(words)


def _assistants_claim(text: str, said: str, talk: str) -> bool:
    """Whether a learned item carries what only the assistant said: more than half of its
    informative words are in the conversation but not in the user's messages. An answer the
    user did not confirm (a wrong command, a guess) is not a fact about the user or the
    project; what the agent checked and means to keep it saves with its own tool."""
    words = [w for w in tokenize(text) if w not in _GENERIC]
    from_user, heard = set(tokenize(said)), set(tokenize(talk))
    theirs = sum(1 for w in words if w in heard and w not in from_user)
    return bool(words) and theirs > 0.5 * len(words)


JUST_NOW = 3600  # seconds within which a learned memory of the same name is this conversation's


def _ago(seconds: float) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds))


@dataclass
class Planner:
    """Turns the model's items into Puts one by one, against the store and each other."""

    store: Store
    shown: set[str]
    said: str
    result: Extraction
    existing: set[str] = field(default_factory=set)
    talk: str = ""  # the whole new talk (assistant's claims are dropped); "": not checked
    planned: dict[str, Put] = field(default_factory=dict)
    retired: dict[str, Remove] = field(default_factory=dict)  # what corrections replace
    twins: dict[str, str] = field(default_factory=dict)  # look-alike key -> listed name
    agent_names: list[str] | None = None  # what the agent's save_memory wrote just now
    slots: dict[str, list[str]] | None = None  # a convention's slot -> the rules that hold it

    def __post_init__(self) -> None:
        self.twins = {skeleton(name): name for name in sorted(self.existing)}

    def _slots(self) -> dict[str, list[str]]:
        """The existing standing rules that state one convention, by the slot it governs."""
        if self.slots is None:
            self.slots = {}
            for entry in self.store.entries():
                if entry.type in STANDING_TYPES or entry.pinned:
                    # (the catalogue's description only: no file read per rule)
                    conv = conventions.one(entry.description)
                    if conv is not None:
                        self.slots.setdefault(conv.slot, []).append(entry.name)
        return self.slots

    def governs(self, raw: Any) -> bool:
        """Whether a rule of this store governs the slot of the convention ``raw`` states
        (the person's rule for that slot then updates this store's, never stands beside it)."""
        if not isinstance(raw, dict):
            return False
        conv = conventions.stated(str(raw.get("description") or ""), str(raw.get("body") or ""))
        return conv is not None and conv.slot in self._slots()

    def _ruled(self) -> set[str]:
        """The existing rules that govern a slot: changed only by a rule of that slot."""
        return {name for names in self._slots().values() for name in names}

    def _as_rule(self, mem: Memory, named: bool) -> Memory | None:
        """``mem`` as the kind of memory it is: a report of what was talked about is a note,
        not a standing rule; a standing rule that states one convention is landed by its slot
        (None: done)."""
        if mem.type in STANDING_TYPES and conventions.reported(mem.description):
            types = self.store.config.types
            return mem.replace(type="project_fact" if "project_fact" in types else types[0])
        if mem.type not in STANDING_TYPES:
            return mem
        conv = conventions.stated(mem.description, mem.body)
        if conv is None:
            return mem
        self.add_convention(mem, conv, named)
        return None

    def add_convention(self, mem: Memory, conv: conventions.Convention, named: bool) -> None:
        """A convention replaces exactly the rules that hold its slot, never a neighbour: the
        rule named for the slot is updated in place; a rule under another name is retired in
        the same operation and the new one takes its type (a preference stays one). A new slot
        is a new rule, under the model's name (``named``) or named for its slot."""
        holders = [n for n in self._slots().get(conv.slot, []) if n not in self.retired]
        for name, put in list(self.planned.items()):  # said twice in one reply: the later
            other = conventions.stated(put.memory.description, put.memory.body)
            if other is not None and other.slot == conv.slot:
                del self.planned[name]
        own = mem.name if named or conv.subject == "practice" else conv.name
        own = self.twins.get(skeleton(own), own)  # a look-alike of a name means that memory
        if own in holders:
            holders.remove(own)
        elif own in self.existing and own in self.shown:
            pass  # the memory the model was shown and names: updated
        else:
            taken = self.existing | self.planned.keys()
            own = own if own not in taken else short_name(own, taken)
            kinds = {self.store.get(n).type for n in holders}
            if len(kinds) == 1:
                mem = mem.replace(type=kinds.pop())
        mem = mem.replace(name=own)
        if self._valid(mem):
            self._put(mem)
            self.retire(holders, mem)

    def add(self, raw: Any) -> None:
        store, planned, existing = self.store, self.planned, self.existing
        coerced = coerce(raw, store, existing | planned.keys())
        if isinstance(coerced, str):
            self.result.dropped.append(coerced)
            return
        action, mem = coerced
        if self.talk and _assistants_claim(f"{mem.description} {mem.body}", self.said, self.talk):
            self.result.dropped.append(f"{mem.name}: the assistant said it; the user did not")
            return
        mem = in_users_language(mem, self.said)
        borrowed = borrowed_description(store, mem)
        if borrowed is not None:
            self.result.dropped.append(f"{mem.name}: {borrowed}")
            return
        named = isinstance(raw, dict) and bool(str(raw.get("name") or "").strip())
        ruled = self._as_rule(mem, named)
        if ruled is None:
            return
        mem = ruled
        if action == "update" and mem.name not in self.shown:
            action = "create"  # the model named a memory it was not shown: never overwrite
        twin = self.twins.get(skeleton(mem.name))
        if twin is not None and twin != mem.name:
            mem = mem.replace(name=twin)  # a look-alike of an existing name means that memory
        if (
            action == "create"
            and mem.name in existing
            and mem.name not in self.shown
            and self._said_just_now(mem.name)
        ):
            action = "update"  # the agent's save_memory (or the last run) kept it this turn
        if mem.name in planned or (
            action == "create" and mem.name in existing and mem.name not in self.shown
        ):
            # two items with one name, or a name the model did not know was taken: keep both
            mem = mem.replace(name=short_name(mem.description, existing | planned.keys()))
        if action == "create" and mem.name not in existing:
            same = self._agent_saved(mem)
            if same is not None:  # the agent's save this turn: one memory of the fact
                mem, action = mem.replace(name=same), "update"
        replaced: list[str] = []
        if action == "create" and mem.name not in existing:
            corrects = self._corrects(mem)
            if corrects is None:
                return
            mem, replaced = corrects
        if any(
            p.memory.description == mem.description and p.memory.body == mem.body
            for p in planned.values()
        ):
            self.result.dropped.append(f"{mem.name}: repeats an item of the same reply")
            return
        if self._valid(mem):
            self._put(self._as_rule_it_replaces(mem, replaced))
            self.retire(replaced, mem)

    def _corrects(self, mem: Memory) -> tuple[Memory, list[str]] | None:
        """A new memory as the update of the one it restates or corrects (``corrected``), and
        the others it makes stale; None: it repeats an item of this reply. A rule that governs
        a convention's slot is never among them (it changes only by a rule of its slot)."""
        found = [n for n in corrected(self.store, mem) if n not in self._ruled()]
        dup = found[0] if found else None
        if dup is not None and dup in self.planned:
            self.result.dropped.append(f"{mem.name}: repeats {dup}")
            return None
        replaced: list[str] = []
        if dup is not None:
            mem, replaced = mem.replace(name=dup), found[1:]
        # what the user's correction named as replaced, however the model worded it
        replaced += [
            n
            for n in stale_by_correction(self.store, mem, self.said)
            if n != dup and n not in self._ruled()
        ]
        return mem, replaced

    def _as_rule_it_replaces(self, mem: Memory, replaced: list[str]) -> Memory:
        """A correction of the person's standing rule is that rule now, whatever type the
        model gave it ("we switched from yarn to pnpm" saved as a project fact replaces "always
        use yarn", a preference): it takes the rule's type, so it stands in the next session
        as the rule it replaces did."""
        if mem.type in STANDING_TYPES or not replaced or mem.name in self.existing:
            return mem  # (a memory the correction updates keeps its own type)
        kinds = {m.type for m in (readable(self.store, n) for n in replaced) if m is not None}
        if len(kinds) == 1 and kinds <= set(STANDING_TYPES):
            return mem.replace(type=kinds.pop())
        return mem

    def retire(self, names: list[str], by: Memory) -> None:
        """Retire the other memories the correction ``by`` replaces (kept in history)."""
        for name in names:
            if name in self.planned or name in self.retired or self.store.get(name).pinned:
                continue  # (a pinned memory is never changed automatically)
            self.retired[name] = Remove(name, reason=f"superseded by {by.name}: {by.description}")

    def _said_just_now(self, name: str) -> bool:
        """Whether ``name`` was written from a conversation moments ago (the agent's own
        save_memory in this turn, the hook's previous run): the same fact, one memory."""
        origin = origin_of(self.store, name)
        if origin.label not in ("agent", "learned") or not origin.at:
            return False
        return origin.at >= _ago(JUST_NOW)

    def _agent_saved(self, mem: Memory) -> str | None:
        """A memory the agent's save_memory wrote moments ago of the same type whose words are
        mostly in ``mem``: the same fact, said shorter ('postgres-16' then 'staging database
        runs Postgres 16')."""
        if self.agent_names is None:
            cutoff = _ago(JUST_NOW)
            self.agent_names = [
                c["name"]
                for op in self.store.log(limit=20)
                if op.source == "agent" and op.time >= cutoff
                for c in op.changes
                if c.get("action") != "remove"
            ]
        words = set(tokenize(f"{mem.description} {mem.body}"))
        for name in self.agent_names:
            if name in self.planned or name not in self.existing:
                continue
            saved = self.store.get(name)
            theirs = set(tokenize(f"{saved.description} {saved.body}"))
            if saved.type == mem.type and theirs and len(theirs & words) / len(theirs) >= 0.6:
                return name
        return None

    def _valid(self, mem: Memory) -> bool:
        """Whether the store takes ``mem`` as it is; else it is dropped, saying why."""
        try:
            self.store.check(mem)
        except (InvalidMemory, InvalidName) as exc:
            self.result.dropped.append(f"{mem.name}: {exc}")
            return False
        return True

    def _put(self, mem: Memory) -> None:
        if mem.name not in self.existing:
            self.planned[mem.name] = Put(mem, reason="extracted from conversation")
            return
        current = self.store.get(mem.name)
        if current.pinned:
            self.result.dropped.append(f"{mem.name} is pinned; not changed automatically")
            return
        if (current.type, current.description, current.body) == (
            mem.type,
            mem.description,
            mem.body,
        ):  # said again: the memory stays as it was (where and when it was first said too)
            self.result.dropped.append(f"{mem.name}: already holds this")
            return
        self.planned[mem.name] = Put(
            mem.replace(extra=dict(current.extra)),
            reason="updated from conversation",
            expect=current.digest,
        )
