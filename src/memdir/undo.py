"""Undo: revert the last applied operation (an extraction, a consolidation, an edit…).

Every change in the log names the history version it replaced, so reverting is a new
operation that restores those versions and removes what was created. Undos are logged too;
repeated undos walk back through earlier operations.
This module does NOT touch files except through ``store.apply``.
"""

from __future__ import annotations

from .disk.atomic import write_atomic
from .disk.layout import ADOPTED
from .errors import ConflictError, MemdirError
from .gate.decisions import accept, accepted
from .gate.provenance import Origin, label_of
from .history import Operation
from .memory import digest_of, loads
from .plan import Change, Put, Remove
from .store import Store, readable


def last_undoable(store: Store) -> Operation | None:
    """The newest operation that is not an undo and was not undone yet."""
    ops = store.log()
    undone = {op.undoes for op in ops if op.undoes}
    for op in reversed(ops):
        if op.source != "undo" and op.id not in undone:
            return op
    return None


def undo(store: Store, *, force: bool = False) -> tuple[Operation, Operation | None]:
    """Revert the last undoable operation; returns it and the undo operation. A memory
    changed since (by hand, or by a tool that left no log line) is not reverted over that
    change unless ``force``: ConflictError names it (the change would still be kept in
    history, but silently undoing a person's edit is wrong)."""
    target = last_undoable(store)
    if target is None:
        raise MemdirError("there is nothing to undo — 'memdir log' shows what was done")
    plan: list[Change] = []
    present = {e.name for e in store.entries()}
    if not force:
        _refuse_over_later_edits(store, target, present)
    theirs: list[str] = []
    before_target: dict[str, tuple[str | None, Origin]] | None = None  # read once, if needed
    for change in target.changes:
        name, before = change["name"], change.get("before")
        if before is None:  # it was created: remove it (it stays in history)
            if name in present:
                plan.append(Remove(name, reason=f"undo {target.id}"))
        else:
            text = store.version_text(name, int(before))
            mem = loads(text).replace(name=name)
            plan.append(Put(mem, reason=f"undo {target.id}", merge_extra=False))
            if before_target is None:
                before_target = _written_before(store, target)
            if _was_users(store, name, text, before_target):
                theirs.append(name)
    summary = f"undo {target.source} {target.id}"
    op = store.apply(plan, source="undo", summary=summary, secrets="allow", undoes=target.id)
    if op is None:  # already reverted by hand: record it, so the next undo goes further back
        op = store.record(summary, source="undo", undoes=target.id)
    for name in theirs:  # the user's own text back: it stands as theirs again
        digest = store.get(name).digest
        if digest is not None:
            accept(store.internal, name, digest)
    if target.source == "doctor":
        _notes_back(store, target)
    return target, op


def _written_before(store: Store, target: Operation) -> dict[str, tuple[str | None, Origin]]:
    """For each memory the log names before ``target``: the digest its last logged change
    wrote, and whose that change was."""
    out: dict[str, tuple[str | None, Origin]] = {}
    for op in store.log():
        if op.id == target.id:
            break
        for ch in op.changes:
            out[ch["name"]] = (ch.get("digest"), Origin(label_of(op.source, ch.get("by"))))
    return out


def _was_users(
    store: Store, name: str, text: str, before: dict[str, tuple[str | None, Origin]]
) -> bool:
    """Whether the text of ``name`` the undone operation replaced was the user's own: written
    by the user through memdir (the last logged change before it, ``before``, wrote exactly
    it) or accepted by the user. A hand edit, a pull or a sync it replaced stays theirs."""
    digest = digest_of(text.encode("utf-8"))
    if accepted(store.internal, name, digest):
        return True
    wrote, origin = before.get(name, (None, None))
    return origin is not None and wrote == digest and origin.users


def _notes_back(store: Store, target: Operation) -> None:
    """Undoing doctor's adoption of a bare note: the note's own file again, byte for byte."""
    kept = store.internal / ADOPTED
    with store.locked():
        for change in target.changes:
            copy = kept / change["file"]
            path = store.root / change["file"]
            if change.get("before") is None and copy.is_file() and not path.exists():
                write_atomic(path, copy.read_bytes())
                copy.unlink()


def _refuse_over_later_edits(store: Store, target: Operation, present: set[str]) -> None:
    """ConflictError if a memory the target touched was changed since memdir last wrote it
    (by hand, or by a tool that left no log line): its file is not what the latest logged
    operation on it wrote."""
    last_written: dict[str, str | None] = {}
    for op in store.log():
        for ch in op.changes:
            if "digest" in ch:
                last_written[ch["name"]] = ch["digest"]
            else:  # an older log line: nothing to compare with
                last_written.pop(ch["name"], None)
    for change in target.changes:
        name = change["name"]
        wrote = last_written.get(name)
        if not wrote or name not in present:
            continue
        mem = readable(store, name)
        if mem is None:
            continue
        if mem.digest != wrote:
            raise ConflictError(
                f"{name} was changed after {target.source} {target.id} (by hand?) — undo"
                " would replace that change; run 'memdir undo --force' to revert anyway (the"
                " change is kept in history)"
            )
