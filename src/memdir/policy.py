"""The one gate: what a person and a model may see of the stores, and what stands as the
user's. Every surface that shows a text to a model — recall's block and catalogue, a
session's start, MCP, the memory tool, the past's block — and every one that says whose a
text is (the UI, review, doctor, the tool hook) asks here (``Policy``) instead of combining
checks of its own; a model-facing surface that reads through ``ModelView`` gets nothing
else.

The four questions, for one memory (``Policy.verdict``): may a person see it (yes, marked
with where it came from, unless it cannot be read), may a model see it (not while it is
held for review — an arrival from elsewhere, or under ``review = "ask"`` a text memdir did
not write — and never when a text someone else wrote reads as an instruction planted for an
agent), does it stand as the user's (this machine's user gave it, or accepted exactly this
text), and why not. Recall offers a model less (``Policy.offered``): a rule of a standing
kind that is not the user's is not offered as a memory to act on.
This module does NOT render anything and does NOT write decisions (``gate.decisions``).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from .config import standing_kind
from .disk.layout import ACCEPTED
from .entry import Entry, Hit
from .errors import InvalidMemory, MemdirError, MemoryNotFound
from .gate.decisions import accepted, active, holds
from .gate.instructions import screen
from .gate.provenance import HAND, UNKNOWN
from .memory import CONFLICT_KEY, Memory
from .scopes import Reader, Scope, Scopes
from .store import Store, origin_of, readable

HELD = "held for review"
PLANTED = "it came from elsewhere and reads as an instruction planted for an agent"
NOT_ACCEPTED = "a rule from elsewhere the user has not accepted"


@dataclass(frozen=True)
class Verdict:
    """The gate's answer for one memory: who may see its text, whether it stands as the
    user's, and why not (``None``: nothing withheld)."""

    person: bool
    model: bool
    users: bool
    why: str | None


class Policy:
    """The gate over a snapshot of the stores (``Scopes``, or one store as a scope of one)."""

    def __init__(self, store: Reader) -> None:
        self.scopes = Scopes.of(store)
        self._held: set[str] | None = None

    def held(self) -> set[str]:
        """The names (as the catalogue shows them) held back from every model."""
        if self._held is None:
            self._held = held_names(self.scopes)
        return self._held

    def verdict(self, shown: str, mem: Memory | None = None) -> Verdict:
        """The four answers for the memory ``shown`` (its text ``mem`` when read already)."""
        mem = readable(self.scopes, shown) if mem is None else mem
        if mem is None:
            return Verdict(False, False, False, "it cannot be read")
        users = users_own(self.scopes, shown, mem.digest)
        if held_back(self.scopes, shown, mem):
            return Verdict(True, False, users, HELD)
        if not users and screen(f"{mem.description}\n{mem.body}") is not None:
            return Verdict(True, False, False, PLANTED)  # (``planted``, its origin read once)
        rule = standing_kind(mem.type, mem.pinned)
        return Verdict(True, True, users, None if users or not rule else NOT_ACCEPTED)

    def offered(self, shown: str) -> Memory | None:
        """The memory recall may put in front of a model as one to act on, else None: one a
        model may see that is not a rule waiting for the user's acceptance (a text of a
        standing kind someone else wrote reaches no model as a memory to act on, at a
        session start or with a prompt; a conflicted one shows this side of git's, marked)."""
        try:
            mem = self.scopes.get(shown)
            self.scopes.scope_of(shown)
        except (InvalidMemory, LookupError):
            return None
        verdict = self.verdict(shown, mem)
        if not verdict.model:
            return None
        rule = standing_kind(mem.type, mem.pinned) and CONFLICT_KEY not in mem.extra
        return None if rule and not verdict.users else mem

    def catalogue(self, entries: Sequence[Entry]) -> list[Entry]:
        """Of these catalogue entries, those a model may be shown (selection, extraction,
        listings): none held back, no description a door planted."""
        held = self.held()
        return [
            e
            for e in entries
            if e.name not in held and not planted_description(self.scopes, e.name, e.description)
        ]


class ModelView:
    """The stores as a model may see them: ``entries``, ``search`` and ``get`` answer only
    with what the gate lets a model see, so a surface built on this view cannot show a held
    or planted text, whatever it forgets to check."""

    def __init__(self, store: Reader) -> None:
        self.policy = Policy(store)

    def entries(self) -> list[Entry]:
        return self.policy.catalogue(self.policy.scopes.entries())

    def search(self, query: str, k: int = 5) -> list[Hit]:
        seen = {e.name for e in self.entries()}
        return [h for h in self.policy.scopes.search(query, k) if h.name in seen]

    def get(self, shown: str) -> Memory:
        """The memory's text; MemoryNotFound (saying why) when a model may not see it."""
        mem = self.policy.scopes.get(shown)
        verdict = self.policy.verdict(shown, mem)
        if not verdict.model:
            raise MemoryNotFound(f"{shown} is not shown to a model: {verdict.why}")
        return mem


def shown(store: Reader, names: Sequence[str]) -> list[str]:
    """Of these memories, those recall offers a model (the budget aside)."""
    gate = Policy(store)
    return [n for n in names if gate.offered(n) is not None]


class Past(Protocol):
    """A memory as it stood at a moment (``memdir_asof``): its text then, and when it was
    replaced (None: it is still current)."""

    @property
    def memory(self) -> Memory: ...
    @property
    def until(self) -> str | None: ...


P = TypeVar("P", bound=Past)


def visible_past(store: Reader, found: Sequence[tuple[str, P]]) -> list[tuple[str, P]]:
    """The memories as they stood at a moment (``memdir_asof``) that a model may be shown: the past
    passes the same doors as the present. A text held for review, or one that reads as an
    instruction planted for an agent, is left out (a replaced version is screened whoever
    wrote it: its origin is not kept)."""
    scopes = {sc.name: sc for sc in Scopes.of(store).scopes}
    out = []
    for scope, held in found:
        where, mem = scopes.get(scope), held.memory
        if where is None or where.store is None:
            continue
        if held.until is None:
            if _held(where, mem.name, mem) or planted(where.store, mem.name, mem):
                continue
        elif screen(f"{mem.description}\n{mem.body}") is not None:
            continue
        out.append((scope, held))
    return out


def planted(store: Reader, shown: str, mem: Memory) -> bool:
    """Whether a memory someone other than the user wrote (a repository, a teammate, another
    agent, a hand edit) and the user did not accept reads as an instruction planted for the
    agent (``instructions``): screened again each time it would be shown, whatever was
    screened when it was written."""
    if origin_of(store, shown, mem.digest).users:
        return False  # (the user's own words: no screen to pay for)
    if screen(f"{mem.description}\n{mem.body}") is None:
        return False
    return not users_own(store, shown, mem.digest)


def users_own(store: Reader, shown: str, digest: str | None) -> bool:
    """Whether the memory ``shown`` (with text ``digest``) is the user's own instruction:
    this machine's user gave it, or accepted exactly this text (``decisions.accepted``)."""
    scopes = Scopes.of(store)
    if origin_of(scopes, shown, digest).users:
        return True
    try:
        scope, name = scopes.locate(shown)
    except LookupError:
        return False
    return scope.store is not None and accepted(scope.store.internal, name, digest)


def planted_description(store: Reader, shown: str, description: str) -> bool:
    """Whether a description a door brought (not the user's words) orders the agent about:
    indexes and listings a model reads leave it out."""
    if screen(description) is None:
        return False
    try:
        digest = Scopes.of(store).get(shown).digest
    except (MemdirError, LookupError, OSError):
        return True
    return not users_own(store, shown, digest)


def held_back(store: Reader, shown: str, mem: Memory | None = None) -> bool:
    """Whether the memory shown as ``shown`` is held back from recall until a person reviews
    it (``decisions.holds``): an arrival from elsewhere, an instruction-shaped text; and under
    ``review = "ask"``, a text memdir did not write (a ``git pull``, a clone, a checkout,
    another program, a hand edit) until the user accepts it (``memdir accept``)."""
    store = Scopes.of(store)
    scope, name = store.locate(shown)
    if scope.store is None:
        return False
    asks = scope.writable and scope.store.config.review == "ask"
    if name not in holds(scope.store.root) and not asks:
        return False
    return _held(scope, name, store.get(shown) if mem is None else mem)


def _held(scope: Scope, name: str, mem: Memory) -> bool:
    """Whether this text of ``name`` in ``scope``'s store waits for a person: held, or under
    ``review = "ask"`` come through a door and not accepted."""
    if scope.store is None:
        return False
    root = scope.store.root
    if name in holds(root) and active(root, name, mem.digest) is not None:
        return True
    asks = scope.writable and scope.store.config.review == "ask"
    return asks and unlogged(scope.store, name, mem)


def unlogged(store: Store, name: str, mem: Memory) -> bool:
    """Whether the text of ``name`` came through a door memdir did not log and the user has
    not accepted it."""
    if origin_of(store, name, mem.digest).label not in (HAND, UNKNOWN):
        return False
    return not accepted(store.internal, name, mem.digest)


def held_names(store: Reader) -> set[str]:
    """The names (as the catalogue shows them) of every memory held back from recall."""
    out = set()
    scopes = Scopes.of(store)
    located = {(sc.name, e.name): shown for sc, e, shown in scopes.located()}
    for scope, st in scopes.stores():
        for name in holds(st.root):
            mem = readable(st, name)
            if mem is not None and active(st.root, name, mem.digest) is not None:
                out.add(located.get((scope.name, name), name))
        if scope.writable and st.config.review == "ask":
            out |= {located.get((scope.name, n), n) for n in unlogged_names(st)}
    return out


# per store: the names whose text memdir did not write, as of the store's version and the
# acceptances file (each memory's file is read to know: once per change, not once per prompt)
_UNLOGGED: weakref.WeakKeyDictionary[Store, tuple[tuple[int, int], set[str]]] = (
    weakref.WeakKeyDictionary()
)


def unlogged_names(st: Store) -> set[str]:
    """The names of ``st`` whose text memdir did not write and the user did not accept."""
    try:
        stamp = os.stat(st.internal / ACCEPTED).st_mtime_ns
    except OSError:
        stamp = 0
    key = (st.version, stamp)
    known = _UNLOGGED.get(st)
    if known is not None and known[0] == key:
        return known[1]
    names = set()
    for e in st.entries():
        mem = readable(st, e.name)
        if mem is not None and unlogged(st, e.name, mem):
            names.add(e.name)
    _UNLOGGED[st] = (key, names)
    return names
