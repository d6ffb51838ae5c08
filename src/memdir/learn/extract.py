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
from typing import Any

from .. import prompts
from ..code import conventions
from ..config import standing_kind
from ..errors import InvalidMemory
from ..find.search import tokenize
from ..gate.safetext import for_body, for_prompt, one_line
from ..history import Operation
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
from .landing import Extraction, Planner, grounded
from .proposal import (
    MAX_ITEMS,
    assistants_promise,
    kind_of,
    preferred_by_user,
    said_by_user,
    stale_by_correction,
    unquoted,
)
from .replies import FACTS_SCHEMA, extract_schema, fact_item, validate_facts, validate_items

log = logging.getLogger("memdir.extract")


def _fact_style(config: Any, model: ChatModel) -> bool:
    """Whether to ask for plain facts (``extract_style``): small models list facts well but
    fill the five-field memory shape with invented text. "auto" asks models on this machine."""
    if config.extract_style == "auto":
        return runs_locally(model, config)
    return bool(config.extract_style == "facts")


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
        kept = [f for f in facts if grounded(f, heard)]
        result.dropped += [f"not in the conversation: {f[:60]}" for f in facts if f not in kept]
        items: list[Any] = [fact_item(f, store.config.types) for f in kept]
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
    planner = Planner(
        store, {e.name for e in entries}, said, result, {e.name for e in store.entries()}, heard
    )
    user_planner = (
        None
        if user_store is None
        else Planner(
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
