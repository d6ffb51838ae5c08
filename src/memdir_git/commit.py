"""What sync commits and what it holds: the store's owned files (``syncguard.stage``),
screened for credentials, with a message that says what was added, updated and retired, and
by whom; and the arrivals a person should see before any model does (``decisions.hold``).

This module does NOT fetch, merge or push (``sync`` does).
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
from collections.abc import Mapping
from pathlib import Path

from memdir import memory as memfmt
from memdir import review as queue
from memdir.entry import INDEX_FILE
from memdir.errors import MemdirError, SecretFound
from memdir.gate.decisions import Hold, hold
from memdir.gate.instructions import screen as screen_instructions
from memdir.history import Operation
from memdir.plan import Put, screen
from memdir.review import ItemData
from memdir.store import MemoryStore
from memdir_git import guard
from memdir_git.git import SyncError
from memdir_git.repo import Where, read_nofollow, state_of


def _screen(root: Path, fname: str) -> None:
    """SyncError naming the file when a file about to be committed holds a credential."""
    try:
        text = (read_nofollow(root / fname) or b"").decode("utf-8")
    except UnicodeDecodeError:
        return
    try:
        mem = memfmt.loads(text)
    except MemdirError:
        from memdir.gate import secrets

        if secrets.scan(text):
            raise SyncError(
                f"refusing to commit {fname}: it holds what looks like a credential — remove it"
            ) from None
        return
    try:
        screen([Put(mem)], "refuse")
    except SecretFound as exc:
        raise SyncError(
            f"refusing to commit {fname}: {exc} — edit the file, or run"
            f" 'memdir rm --purge {mem.name}' (it stays out of git until then)"
        ) from None


def _message(store: MemoryStore, status: list[tuple[str, str]], since: str) -> str:
    """The commit message: what was added, updated and retired, and by whom (the sources of
    the logged operations after ``since``, the last one a commit covered)."""
    groups: dict[str, list[str]] = {"added": [], "updated": [], "retired": []}
    for code, fname in status:
        if not guard.is_memory(fname):
            continue
        key = {"A": "added", "D": "retired"}.get(code[0], "updated")
        groups[key].append(fname[:-3])
    ops = store.log(limit=1000)
    ids = [op.id for op in ops]
    by: dict[str, set[str]] = {}
    for op in ops[ids.index(since) + 1 if since in ids else 0 :]:
        for ch in op.changes:
            by.setdefault(ch["name"], set()).add("hand edit" if op.source == "hand" else op.source)
    counts = [f"{len(v)} {k}" for k, v in groups.items() if v]
    lines = ["memdir: " + (", ".join(counts) if counts else "store settings"), ""]
    for key, names in groups.items():
        if names:
            lines.append(f"{key}: {_some(sorted(names))}")
    sources: dict[str, list[str]] = {}
    for names in groups.values():
        for name in sorted(names):
            for src in sorted(by.get(name, {"hand edit"})):
                sources.setdefault(src, []).append(name)
    if sources:
        lines.append("by: " + "; ".join(f"{s} ({_some(n)})" for s, n in sorted(sources.items())))
    lines.append(f"on: {socket.gethostname() or 'localhost'}")
    return "\n".join(lines) + "\n"


def _some(names: list[str], most: int = 20) -> str:
    """Names for a commit message: all of a few, the first ``most`` of many."""
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def commit_local(where: Where, store: MemoryStore) -> str | None:
    """Commit the store's changes (only its folder); the commit's first line, or None."""
    git = where.git
    status = guard.stage(git, where.rel, store.root)
    if not status:
        return None
    for code, fname in status:
        if code[0] != "D" and fname.endswith(".md") and fname != INDEX_FILE:
            try:
                _screen(store.root, fname)
            except SyncError:
                git.run("reset", "-q", "--", where.path(fname), check=False)
                raise
    since = str(state_of(store.root).read().get("logged", ""))
    message = _message(store, status, since)
    git.run("commit", "-q", "-F", "-", input=message.encode())
    last = store.log(limit=1)
    if last:
        state_of(store.root).update(lambda s: s.__setitem__("logged", last[-1].id))
    return message.splitlines()[0]


def hold_arrivals(
    store: MemoryStore,
    op: Operation,
    before: Mapping[str, bytes | None],
    remote: str,
    commit: str,
) -> list[Hold]:
    """Hold back from recall what a merge brought that a person should see first: every
    arrival when the store says ``review = "ask"``, a pin set elsewhere, a name that passes for
    another one here, a text that reads as an instruction to an agent. Each hold waits in the
    review queue (approve: recalled from then on; reject: the text before it comes back); the
    holds made."""
    ask = store.config.review == "ask"
    made: list[Hold] = []
    items: list[ItemData] = []
    twins = {memfmt.skeleton(e.name): e.name for e in store.entries()}
    for ch in op.changes:
        if ch["action"] == "delete" or not ch.get("digest"):
            continue
        by = ch.get("by") or remote
        text = read_nofollow(store.root / ch["file"])
        try:
            mem = memfmt.loads((text or b"").decode("utf-8"))
        except (UnicodeDecodeError, MemdirError):
            continue
        old = before.get(ch["file"])
        was_pinned = False
        if old is not None:
            with contextlib.suppress(UnicodeDecodeError, MemdirError):
                was_pinned = memfmt.loads(old.decode("utf-8")).pinned
        twin = twins.get(memfmt.skeleton(mem.name))
        order = screen_instructions(f"{mem.description}\n{mem.body}")
        if twin is not None and twin != mem.name:
            why = f"its name passes for {twin!r} (case or look-alike letters)"
        elif order is not None:
            why = f"it reads as an instruction to an agent: {order}"
        elif mem.pinned and not was_pinned:
            why = f"pinned by {by}"
        elif ask:
            why = f"arrived by sync from {by} (review = ask)"
        else:
            continue
        made.append(Hold(mem.name, str(ch["digest"]), why, by))
        items.append(
            {
                "action": "hold",
                "name": mem.name,
                "text": (text or b"").decode("utf-8"),
                "reason": why,
                "state": "pending",
                "before": ch["before"],
            }
        )
    if not made:
        return []
    summary = f"arrived from {remote} in {commit[:12]}"
    pid = queue.propose(store, items, source=f"sync:{made[0].by}", summary=summary)
    held = [dataclasses.replace(h, proposal=pid) for h in made]
    hold(store.root, held)
    return held
