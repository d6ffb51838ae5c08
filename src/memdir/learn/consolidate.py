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

import logging
import math
from collections.abc import Callable
from typing import Any

from .. import prompts
from ..disk.layout import CONSOLIDATE as STATE
from ..disk.statefile import State, StateFile
from ..entry import Entry
from ..errors import LLMError, PlanError
from ..find.search import tokenize
from ..gate.decisions import accept
from ..gate.safetext import for_body, for_prompt
from ..memory import now as memory_now
from ..policy import Policy, shown
from ..providers import ChatModel, complete_json, runs_locally
from ..review import land
from ..store import Store, readable
from .plan import Consolidation, _answer, _schema, validate_plan

log = logging.getLogger("memdir.consolidate")
MAX_RETIRE_PER_RUN = 200  # even with --force, one run retires at most this many
BODY_CHARS = 1200  # per memory in the prompt


def _file(store: Store) -> StateFile:
    return StateFile(store.internal / STATE, lock=store.locked)


def _state(store: Store) -> State:
    return _file(store).read()


def _update_state(store: Store, *, turn: bool = False, **changes: Any) -> None:
    """Change some keys of the state (``turn``: count one more turn), reading and writing
    under the store lock, so that two agents lose no update."""
    if store.read_only:
        return
    with _file(store).changing() as state:
        state.update(changes)
        if turn:
            state["turns"] = int(state.get("turns", 0)) + 1


def note_turn(store: Store) -> None:
    """Count one agent turn towards the cooldown."""
    _update_state(store, turn=True)


def changed_since_last_run(store: Store, entries: list[Entry] | None = None) -> list[Entry]:
    """Memories created or updated since the last consolidation began, and those a previous
    run left for later (its budget ran out)."""
    state = _state(store)
    entries = store.entries() if entries is None else entries
    since = state.get("since")
    pending = set(state.get("pending", []))
    if not isinstance(since, str):
        return [e for e in entries if not e.pinned]
    return [
        e
        for e in entries
        if not e.pinned and (e.name in pending or (e.updated or e.created or "") >= since)
    ]


def is_due(store: Store) -> bool:
    """Whether an automatic run is due: past the threshold, something changed since the last
    run (a store that cannot shrink does not trigger every turn), and at least the cooldown
    number of turns after the last run."""
    cfg = store.config
    entries = store.entries()
    if len(entries) <= cfg.consolidate_threshold:
        return False
    state = _state(store)
    if "since" in state and int(state.get("turns", 0)) < cfg.consolidate_cooldown:
        return False
    return bool(changed_since_last_run(store, entries))


# -- what ---------------------------------------------------------------------------------


class _Neighbours:
    """Which memories are about the same thing: an in-memory index of the informative words
    of names and descriptions (words in many memories say little and are skipped)."""

    def __init__(self, entries: list[Entry]) -> None:
        self.terms: dict[str, set[str]] = {}
        self.postings: dict[str, list[str]] = {}
        for e in entries:
            words = {
                w
                for w in tokenize(f"{e.name.replace('-', ' ')} {e.description}")
                if not w.isdigit()
            }  # numbered names say nothing about the topic
            self.terms[e.name] = words
            for w in words:
                self.postings.setdefault(w, []).append(e.name)
        n = max(1, len(entries))
        self.idf = {w: math.log(1 + n / len(p)) for w, p in self.postings.items()}
        self.common = max(50, n // 100)

    def of(self, name: str, limit: int) -> list[str]:
        """Up to ``limit`` memories closest to ``name``, closest first."""
        scores: dict[str, float] = {}
        shared = [w for w in self.terms.get(name, ()) if len(self.postings[w]) > 1]
        words = [w for w in shared if len(self.postings[w]) <= self.common]
        if not words and shared:  # only common words: the least common still says something
            words = [min(shared, key=lambda w: len(self.postings[w]))]
        for w in words:
            for other in self.postings[w]:
                if other != name:
                    scores[other] = scores.get(other, 0.0) + self.idf[w]
        if not scores:
            return []
        best = max(scores.values())
        ranked = sorted(scores, key=lambda o: (-scores[o], o))[:limit]
        return [o for o in ranked if scores[o] >= best / 2]  # weak matches share little


def _groups(entries: list[Entry], seeds: list[Entry], size: int) -> list[list[Entry]]:
    """Disjoint batches of related memories, each at most ``size``: every seed with its
    nearest neighbours (a small store is one batch); a batch of one is left out."""
    if not seeds:
        return []
    if len(entries) <= size:
        return [entries] if len(entries) > 1 else []
    by_name = {e.name: e for e in entries}
    near = _Neighbours(entries)
    used: set[str] = set()
    groups: list[list[Entry]] = []
    for seed in seeds:
        if seed.name in used:
            continue
        group = [seed]
        for other in near.of(seed.name, size * 2):
            if len(group) >= size:
                break
            if other not in used and other != seed.name:
                group.append(by_name[other])
        used.update(e.name for e in group)
        groups.append(group)
    # Fold small groups together so each prompt has enough to compare.
    merged: list[list[Entry]] = []
    for g in sorted(groups, key=len, reverse=True):
        if merged and len(merged[-1]) + len(g) <= size:
            merged[-1].extend(g)
        else:
            merged.append(g)
    return [g for g in merged if len(g) > 1]


def _prompt(store: Store, batch: list[Entry], seen: dict[str, str | None]) -> str:
    parts = []
    for e in batch:
        mem = readable(store, e.name)
        if mem is None:
            continue
        seen[e.name] = mem.digest
        body = mem.body
        if len(body) > BODY_CHARS:
            body = body[:BODY_CHARS] + " […]"
        body = "\n".join("  " + line for line in for_body(body).splitlines())
        parts.append(
            f"## {e.name}\n({for_prompt(e.type)}, updated"
            f" {for_prompt(e.updated or 'unknown')}) {for_prompt(e.description)}\n{body}"
        )
    return prompts.render(
        "consolidate", memories="\n\n".join(parts), types=", ".join(store.config.types)
    )


def _proposes(cfg: Any, model: ChatModel) -> bool:
    """Whether an automatic run keeps its plan for a person (``consolidate_auto``): "auto"
    does with a model on this machine, usually small, which tidies badly more often than not."""
    if cfg.consolidate_auto == "auto":
        return runs_locally(model, cfg)
    return bool(cfg.consolidate_auto == "propose")


def _changed_since_last_run(store: Store) -> set[str]:
    """The memories any logged operation wrote since the last run began (by the log, not
    the clock: one second holds many writes)."""
    mark = _state(store).get("since_op")
    ops = store.log(limit=2000)
    ids = [op.id for op in ops]
    start = ids.index(mark) + 1 if isinstance(mark, str) and mark in ids else 0
    if not isinstance(mark, str):  # no run yet: nothing is "since" one
        return set()
    return {ch["name"] for op in ops[start:] for ch in op.changes}


ProgressFn = Callable[[int, int, int], None]  # (batch done, batches, model calls so far)


def consolidate_memories(
    store: Store,
    model: ChatModel,
    *,
    force: bool = False,
    dry_run: bool = False,
    whole: bool = False,
    max_calls: int | None = None,
    progress: ProgressFn | None = None,
    automatic: bool = False,
) -> Consolidation:
    """Ask the model how to tidy the store, validate the plan, and apply it as one transaction.

    By default only memories created or changed since the last run (and what an earlier run
    left over) are looked at, each with its nearest neighbours, within ``max_calls`` model
    calls (``consolidate_max_calls``); seeds beyond the budget are kept for the next run.
    ``whole`` looks at every memory (``memdir consolidate --all``), without a call budget.
    ``automatic``: a run nobody watches (after a turn): recent and person-stated memories
    are not retired, and with a model on this machine the plan waits for review instead of
    being applied.
    Raises PlanError (changing nothing) when the plan would retire more than the configured
    share of the store and ``force`` is not set; even with ``force`` a run retires at most
    ``MAX_RETIRE_PER_RUN`` memories.
    """
    if automatic:  # one automatic run per store at a time; another finds it at work
        import filelock

        lock = filelock.FileLock(str(store.internal / "consolidate.lock"), timeout=0)
        try:
            lock.acquire()
        except filelock.Timeout:
            return Consolidation(dropped=["another consolidation of this store is at work"])
        try:
            return _consolidate(store, model, force, dry_run, whole, max_calls, progress, True)
        finally:
            lock.release()
    return _consolidate(store, model, force, dry_run, whole, max_calls, progress, False)


def _consolidate(
    store: Store,
    model: ChatModel,
    force: bool,
    dry_run: bool,
    whole: bool,
    max_calls: int | None,
    progress: ProgressFn | None,
    automatic: bool,
) -> Consolidation:
    cfg = store.config
    store.refresh()  # decide on the files as they are now, hand edits included
    started = memory_now()
    recent = _changed_since_last_run(store) if automatic else None
    everything = store.entries()
    entries = [e for e in everything if not e.pinned and not e.conflicted]
    kept = {e.name for e in entries}  # (a seed left out above is no model's to see either)
    seeds = (
        entries
        if whole
        else [e for e in changed_since_last_run(store, everything) if e.name in kept]
    )
    budget = None if whole else (max_calls if max_calls is not None else cfg.consolidate_max_calls)
    batches = _groups(entries, seeds, cfg.consolidate_batch)
    plan = Consolidation()
    last = store.log(limit=1)
    plan.last_op = last[-1].id if last else None  # what a later run counts as "since"
    left: list[str] = []
    for k, batch in enumerate(batches):
        if budget is not None and plan.batches >= budget:
            left += [e.name for e in batch if e.name in {s.name for s in seeds}]
            continue
        # what no model is shown (held for review, a door's planted instruction) is not
        # consolidated: asked per batch, what is sent (a whole store's check is seconds)
        visible = set(shown(store, [e.name for e in batch]))
        batch = [e for e in batch if e.name in visible]
        if len(batch) < 2:
            continue
        plan.batches += 1
        try:
            answer = complete_json(
                model,
                system="You consolidate memories and answer in JSON.",
                messages=[{"role": "user", "content": _prompt(store, batch, plan.seen)}],
                purpose="consolidate",
                validate=_answer,
                max_tokens=4096,
                schema=_schema(cfg.types),
            )
        except LLMError as exc:
            if len(batches) == 1:
                raise
            plan.dropped.append(f"a batch of {len(batch)} failed: {exc}")
            continue
        finally:
            if progress is not None:
                progress(k + 1, len(batches), plan.batches)
        part = validate_plan(store, answer, {e.name for e in batch}, recent=recent)
        plan.merges += part.merges
        plan.retires += part.retires
        plan.dropped += part.dropped
    plan.left = left
    if len(plan.retires) > MAX_RETIRE_PER_RUN:
        plan.dropped += [
            f"retire {n}: over the {MAX_RETIRE_PER_RUN} retirements one run may make"
            for n, _ in plan.retires[MAX_RETIRE_PER_RUN:]
        ]
        plan.retires = plan.retires[:MAX_RETIRE_PER_RUN]
    for note in plan.dropped:
        log.info("consolidate: dropped %s", note)
    total = len(everything)
    # a small store may always lose one memory: 30% of three is none
    limit = max(1, math.floor(total * cfg.consolidate_max_retire_share))
    if len(plan.retires) > limit and not force:
        if not dry_run:  # refused: the next turns must not ask the model again at once,
            # but what it looked at stays pending for the next run (after the cooldown)
            keep = sorted(
                {e.name for e in seeds} | set(left) | set(_state(store).get("pending", []))
            )
            _update_state(store, since=started, since_op=plan.last_op, pending=keep, turns=0)
        raise PlanError(
            f"the plan retires {len(plan.retires)} of {total} memories, more than the"
            f" {cfg.consolidate_max_retire_share:.0%} allowed — review it with --dry-run,"
            " then rerun with --force"
        )
    plan.started = started
    if dry_run:
        return plan
    return apply_plan(store, plan, ask=automatic and _proposes(cfg, model))


def _all_users(store: Store, names: list[str]) -> bool:
    """Whether every memory of a merge is the user's own instruction as it stands now."""
    gate = Policy(store)
    return all(gate.verdict(n).users for n in names)


def _keep_as_users(store: Store, names: list[str]) -> None:
    """A merge of the user's own memories restates their words: it stands as theirs, as
    each of its sources did (a merge with any text from elsewhere waits for the user)."""
    for mem in filter(None, (readable(store, name) for name in names)):
        if mem.digest is not None:
            accept(store.internal, mem.name, mem.digest)


def apply_plan(store: Store, plan: Consolidation, *, ask: bool = False) -> Consolidation:
    """Apply a plan (one ``consolidate_memories(dry_run=True)`` made and a person approved)
    as one transaction, and reset the trigger; ``ask``: keep it for a person instead."""
    if not plan.is_empty():
        theirs = [m.into.name for m in plan.merges if _all_users(store, m.sources)]
        landed = land(
            store,
            plan.changes,
            source="consolidate",
            summary=f"merged {len(plan.merges)} groups, retired {len(plan.retires)}",
            ask=ask,
        )
        plan.operation, plan.proposal = landed.operation, landed.proposal
        if landed.operation is not None:
            _keep_as_users(store, theirs)
    # Even a run that changed nothing resets the trigger: something must change again first.
    _update_state(
        store,
        since=plan.started or memory_now(),
        since_op=plan.last_op,
        pending=plan.left,
        turns=0,
    )
    return plan
