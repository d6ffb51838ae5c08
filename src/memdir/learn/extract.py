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

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from .. import prompts
from ..code import conventions
from ..config import STANDING_TYPES, standing_kind
from ..errors import InvalidMemory, InvalidName, MemdirError
from ..find.search import tokenize
from ..gate.safetext import for_body, for_prompt, one_line
from ..history import Operation
from ..memory import Memory, skeleton
from ..plan import Put, Remove
from ..policy import Policy
from ..providers import ChatModel, Message, complete_json, runs_locally
from ..recall import catalogue_for, message_text
from ..review import land
from ..scopes import USER_TYPES
from ..store import Store
from .conversation import (
    Cursors,
    embed_episodes,
    keep_episodes,
    render_new,
    said_in,
    supersede_episodes,
)
from .proposal import (
    MAX_ITEMS,
    assistants_promise,
    borrowed_description,
    coerce,
    corrected,
    in_users_language,
    kind_of,
    preferred_by_user,
    said_by_user,
    short_name,
    stale_by_correction,
    unquoted,
)
from .replies import FACTS_SCHEMA, extract_schema, fact_item, validate_facts, validate_items

log = logging.getLogger("memdir.extract")


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


def _fact_style(config: Any, model: ChatModel) -> bool:
    """Whether to ask for plain facts (``extract_style``): small models list facts well but
    fill the five-field memory shape with invented text. "auto" asks models on this machine."""
    if config.extract_style == "auto":
        return runs_locally(model, config)
    return bool(config.extract_style == "facts")


_GENERIC = frozenset(
    tokenize(
        "user users assistant prefer prefers want wants fact facts project people remember memory"
    )
)


def _grounded(fact: str, heard: set[str]) -> bool:
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


SCOPE_RULE = (
    '\nEach memory also has a "scope": "user" for what is about the person in any project'
    ' (preferences, how they like to communicate, habits), "project" for what is about this'
    " repository. Memories marked [user] in the catalogue are in the user's scope."
)


def _ask(
    store: Store,
    model: ChatModel,
    talk: str,
    catalogue: str,
    result: Extraction,
    scoped: bool = False,
) -> list[Any]:
    """The model's items for the new talk: memories, or facts made into memories."""
    if _fact_style(store.config, model):
        prompt = prompts.render("extract_facts", catalogue=catalogue, conversation=for_body(talk))
        facts = complete_json(
            model,
            system="You extract facts and answer in JSON.",
            messages=[{"role": "user", "content": prompt}],
            purpose="extract",
            validate=validate_facts,
            schema=FACTS_SCHEMA,
        )
        heard = set(tokenize(talk))
        grounded = [f for f in facts if _grounded(f, heard)]
        result.dropped += [f"not in the conversation: {f[:60]}" for f in facts if f not in grounded]
        items: list[Any] = [fact_item(f, store.config.types) for f in grounded]
    else:
        prompt = prompts.render(
            "extract",
            catalogue=catalogue,
            types=", ".join(store.config.types),
            conversation=for_body(talk),
            scope_rule=SCOPE_RULE if scoped else "",
        )
        items = complete_json(
            model,
            system="You extract memories and answer in JSON.",
            messages=[{"role": "user", "content": prompt}],
            purpose="extract",
            validate=validate_items,
            schema=extract_schema(store.config.types, scoped),
        )
    if len(items) > MAX_ITEMS:
        result.dropped.append(f"{len(items) - MAX_ITEMS} items past the first {MAX_ITEMS}")
        items = items[:MAX_ITEMS]
    return items


JUST_NOW = 3600  # seconds within which a learned memory of the same name is this conversation's


def _ago(seconds: float) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds))


@dataclass
class _Planner:
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
        try:
            self.store.check(mem)
        except (InvalidMemory, InvalidName) as exc:
            self.result.dropped.append(f"{mem.name}: {exc}")
            return
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
        try:
            store.check(mem)
        except (InvalidMemory, InvalidName) as exc:
            self.result.dropped.append(f"{mem.name}: {exc}")
            return
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
        kinds = set()
        for name in replaced:
            try:
                kinds.add(self.store.get(name).type)
            except (InvalidMemory, LookupError):
                continue
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
        try:
            origin = self.store.origin(name)
        except MemdirError:
            return False
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


def validate_said(value: str) -> str:
    """An ISO 8601 date or date-time (``2023-05-08``, ``2023-05-08T13:56:00Z``), as given."""
    import datetime

    text = value.strip()
    try:
        datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidMemory(
            f"said_at {value!r} is not an ISO date — write it like"
            " 2023-05-08 or 2023-05-08T13:56:00Z"
        ) from None
    return text


def _is_users(raw: Any) -> bool:
    """Whether an item belongs to the user's own store: as the model says, else by its kind."""
    if not isinstance(raw, dict):
        return False
    scope = str(raw.get("scope") or "").strip().lower()
    if scope in ("user", "project"):
        return scope == "user"
    return kind_of(str(raw.get("type") or "")) in USER_TYPES


def _as_conventions(raw: Any, types: tuple[str, ...]) -> list[Any]:
    """An item that states how code must be written, as one standing rule per convention it
    states (``learn.conventions``), in the project's store unless the model said it is the
    person's own in every project; any other item as it is."""
    if not isinstance(raw, dict) or "feedback" not in types:
        return [raw]
    text = f"{raw.get('description') or ''}\n{raw.get('body') or ''}"
    found = conventions.read(str(raw.get("body") or "")) or conventions.read(text)
    if not found:
        return [raw]
    if found[0].subject == "practice":  # an instruction on how to work: a rule, in its words
        fact = kind_of(str(raw.get("type") or "")) in ("project_fact", "")
        return [{**raw, "type": "feedback"} if fact and len(found) == 1 else raw]
    user = str(raw.get("scope") or "").strip().lower() == "user" or (
        kind_of(str(raw.get("type") or "")) == "user_preference" and raw.get("scope")
    )
    rule = {**raw, "type": "user_preference" if user else "feedback"}
    if len(found) == 1:
        return [rule]
    body = str(raw.get("body") or raw.get("description") or "")
    return [
        {**rule, "name": "", "description": one_line(piece), "body": piece}
        for piece in conventions.split(body)
    ]


def plan_extraction(
    store: Store,
    messages: list[Message],
    model: ChatModel,
    start: int = 0,
    *,
    user_store: Store | None = None,
) -> Extraction:
    """Ask the model about ``messages[start:]`` and turn its answer into a safe plan. With
    ``user_store``, items about the person (the model's ``scope``, else their kind) are planned
    against that store instead (``user_changes``)."""
    result = Extraction(new_messages=len(messages) - start)
    if start >= len(messages):
        return result
    store.refresh()
    talk = render_new(messages, start, 4 * 6000)
    # Large stores: show the memories the new talk is most likely to touch (pinned included).
    # (what no model is shown — held for review, a door's planted description — this one neither)
    entries = Policy(store).catalogue(catalogue_for(store, talk, store.config.select_catalogue_max))
    lines = [f"- {e.name} ({for_prompt(e.type)}): {for_prompt(e.description)}" for e in entries]
    user_entries = []
    if user_store is not None:
        user_store.refresh()
        user_entries = Policy(user_store).catalogue(
            catalogue_for(user_store, talk, store.config.select_catalogue_max)
        )
        lines += [
            f"- {e.name} ({for_prompt(e.type)}) [user]: {for_prompt(e.description)}"
            for e in user_entries
        ]
    items = _ask(
        store, model, talk, "\n".join(lines) or "(none yet)", result, scoped=user_store is not None
    )
    said = "\n".join(message_text(m) for m in messages[start:] if m.get("role") == "user")
    # a small model's facts are near-verbatim: one the assistant alone said is its claim (a
    # larger model writes memories in its own words, and its prompt says not to keep claims)
    heard = talk if _fact_style(store.config, model) else ""
    planner = _Planner(
        store, {e.name for e in entries}, said, result, {e.name for e in store.entries()}, heard
    )
    user_planner = (
        None
        if user_store is None
        else _Planner(
            user_store,
            {e.name for e in user_entries},
            said,
            result,
            {e.name for e in user_store.entries()},
            heard,
        )
    )
    replied = "\n".join(message_text(m) for m in messages[start:] if m.get("role") == "assistant")
    for raw in [part for item in items for part in _as_conventions(item, store.config.types)]:
        if isinstance(raw, dict) and assistants_promise(raw, said, replied):
            result.dropped.append(f"the assistant's own promise: {str(raw.get('name'))[:60]}")
            continue
        if (
            isinstance(raw, dict)
            and not str(raw.get("scope") or "").strip()  # (a scope the model gave stands)
            and not _is_users(raw)
            and preferred_by_user(raw, said)
        ):
            raw = {**raw, "type": "user_preference", "scope": "user"}  # the person's own
        if user_planner is not None and _is_users(raw) and not planner.governs(raw):
            user_planner.add(raw)
        else:
            planner.add(raw)
    if user_planner is not None:  # a project fact the model took for a preference still
        for put in user_planner.planned.values():  # retires what the user said it replaced
            planner.retire(stale_by_correction(store, put.memory, said), put.memory)
    result.changes = list(planner.planned.values())
    result.retired = [r for n, r in planner.retired.items() if n not in planner.planned]
    if user_planner is not None:
        result.user_changes = list(user_planner.planned.values())
        result.user_retired = [
            r for n, r in user_planner.retired.items() if n not in user_planner.planned
        ]
    for note in result.dropped:
        log.info("extract: dropped %s", note)
    return result


def extract_memories(
    store: Store,
    messages: list[Message],
    model: ChatModel,
    *,
    apply: bool = True,
    user_store: Store | None = None,
    said_at: str | None = None,
    source: str = "extract",
) -> Extraction:
    """Extract from the messages not processed yet; apply the plan and advance the cursor.

    With ``apply=False`` nothing is written and the cursor stays (a dry run). With
    ``user_store``, memories about the person go there (see ``plan_extraction``); the cursor
    stays with ``store``. ``said_at`` (an ISO date or time): when the conversation took place,
    if not now (a transcript read later); each memory records it as ``said`` and recall shows
    it, so that "when" questions are answered with the conversation's date, not the day the
    memory was written. ``source``: who learned it, as the log and the activity page say
    (``extract``, ``extract:agent``, ``extract:hook:claude-code``).
    """
    said = validate_said(said_at) if said_at is not None else None  # before any model call
    cursors = Cursors(store)
    start = cursors.start(messages)
    if apply:  # what was said is kept before the model is asked, whatever it answers
        kept_from, refs = keep_episodes(store, messages, said)
        if kept_from < start:
            refs = []  # turns kept long before: not what this extraction learns from
        if refs:
            embed_episodes(store, load=False)
    result = plan_extraction(store, messages, model, start, user_store=user_store)
    if said is not None:
        for changes in (result.changes, result.user_changes):
            changes[:] = [
                dataclasses.replace(
                    c, memory=c.memory.replace(extra={**c.memory.extra, "said": said})
                )
                for c in changes
            ]
    if not apply:
        return result
    if refs:  # what was learned points back to where it was said
        where = refs[0] if len(refs) == 1 else f"{refs[0]}-{refs[-1].rsplit('#', 1)[1]}"
        for changes in (result.changes, result.user_changes):
            changes[:] = [
                dataclasses.replace(
                    c, memory=c.memory.replace(extra={**c.memory.extra, "episode": where})
                )
                for c in changes
            ]
    said_here = unquoted(
        "\n".join(message_text(m) for m in messages[start:] if m.get("role") == "user")
    )  # (what the user quoted or pasted is not what they said)
    if result.changes:
        result.operation = _land(store, result, result.changes, result.retired, source, said_here)
    if result.user_changes and user_store is not None:
        result.user_operation = _land(
            user_store, result, result.user_changes, result.user_retired, source, said_here
        )
    cursors.advance(messages)
    return result


def _land(
    store: Store,
    result: Extraction,
    changes: list[Put],
    retired: list[Remove],
    source: str,
    said: str,
) -> Operation | None:
    """Apply what was learned for ``store``: a rule of a standing kind that the user's own
    words do not carry (the assistant's promise or suggestion) is logged as the assistant's
    (``learned:assistant``), so it never stands as the user's until the user accepts it."""
    theirs = [
        c
        for c in changes
        if standing_kind(c.memory.type, c.memory.pinned) and not said_by_user(c.memory, said)
    ]
    mine = [c for c in changes if c not in theirs]
    operation = None
    for part, extra, where in ((mine, retired, source), (theirs, [], f"{source}:assistant")):
        if not part:
            continue
        names = ", ".join(c.memory.name for c in part)
        corrected_in = said_in(store, [r.name for r in extra])  # (read before they go)
        landed = land(store, [*part, *extra], source=where, summary=f"extracted {names}")
        if landed.operation is not None:  # what the corrected memories were learned from
            supersede_episodes(store, corrected_in, names)  # is not recalled beside the fix
        operation = operation or landed.operation
        result.proposals += [landed.proposal] if landed.proposal else []
    return operation
