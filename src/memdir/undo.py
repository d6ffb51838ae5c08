"""Undo: revert the last applied operation (an extraction, a consolidation, an edit…).

Every change in the log names the history version it replaced, so reverting is a new
operation that restores those versions and removes what was created. Undos are logged too;
repeated undos walk back through earlier operations.
This module does NOT touch files except through ``store.apply``.
"""

from __future__ import annotations

from .errors import MemdirError
from .history import Operation
from .memory import loads
from .plan import Change, Put, Remove
from .store import MemoryStore


def last_undoable(store: MemoryStore) -> Operation | None:
    """The newest operation that is not an undo and was not undone yet."""
    ops = store.log()
    undone = {op.undoes for op in ops if op.undoes}
    for op in reversed(ops):
        if op.source != "undo" and op.id not in undone:
            return op
    return None


def undo(store: MemoryStore) -> tuple[Operation, Operation | None]:
    """Revert the last undoable operation; returns it and the undo operation."""
    target = last_undoable(store)
    if target is None:
        raise MemdirError("there is nothing to undo — 'memdir log' shows what was done")
    plan: list[Change] = []
    present = {e.name for e in store.entries()}
    for change in target.changes:
        name, before = change["name"], change.get("before")
        if before is None:  # it was created: remove it (it stays in history)
            if name in present:
                plan.append(Remove(name, reason=f"undo {target.id}"))
        else:
            mem = loads(store.version_text(name, int(before))).replace(name=name)
            plan.append(Put(mem, reason=f"undo {target.id}", merge_extra=False))
    summary = f"undo {target.source} {target.id}"
    op = store.apply(plan, source="undo", summary=summary, secrets="allow", undoes=target.id)
    if op is None:  # already reverted by hand: record it, so the next undo goes further back
        op = store.record(summary, source="undo", undoes=target.id)
    return target, op
