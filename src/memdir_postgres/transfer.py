"""Moving a store between backends: ``export`` writes any store (a folder, a database store)
as a files store, memories and history; ``import_store`` loads a files store into any store.
A memory's file text crosses byte for byte; history versions keep their numbers and times.
Both refuse, before writing anything, a target that already holds one of the names.
This module does NOT choose the backend (``store.open_store`` does).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from memdir.disk.layout import state_dir
from memdir.errors import ConflictError, MemdirError, StoreNotFound
from memdir.gate.decisions import Hold, accept, accepted, active, hold
from memdir.history import Operation
from memdir.store import MemoryStore, Store, Taken


def items_of(store: Store) -> list[Taken]:
    """Every memory of ``store`` and every retired one, with its history, as ``take`` wants."""
    out: list[Taken] = []
    for name in [e.name for e in store.entries()] + store.retired():
        versions = [(v, store.version_text(name, v.version)) for v in store.history(name)]
        text = store.text(name) if name in store else None
        out.append((name, text, versions))
    return out


def export(store: Store, dest: Path, *, source: str = "export") -> Operation | None:
    """Write ``store`` as a files store at ``dest`` (new, or a store without memories)."""
    if dest.exists() and not dest.is_dir():
        raise ConflictError(f"{dest} is a file — give a folder to export into")
    if dest.is_dir() and any(p.suffix == ".md" and p.name != "MEMORY.md" for p in dest.iterdir()):
        raise ConflictError(f"{dest} already holds memory files — export into a new folder")
    config = dataclasses.replace(store.config, dir=dest, database_url=None)
    with MemoryStore(dest, config, create=True, watch=False) as target:
        op = target.take(items_of(store), source=source)
        carry_trust(store, target)
        return op


def import_store(src: Path, store: Store, *, source: str = "import") -> Operation | None:
    """Load the files store at ``src`` (memories and history) into ``store``."""
    if not state_dir(src).is_dir() and not any(src.glob("*.md")):
        raise StoreNotFound(f"no memory store at {src} — give the folder that holds the .md files")
    config = dataclasses.replace(store.config, dir=src, database_url=None)
    with MemoryStore(src, config, create=False, watch=False) as origin:
        op = store.take(items_of(origin), source=source)
        carry_trust(origin, store)
    return op


def carry_trust(source: Store, target: Store) -> None:
    """What this machine decided about the memories of ``source`` holds in ``target`` too: a
    text the user gave or accepted stays theirs (accepted in the target), a held one stays
    held. Texts a move carries are the same bytes, so the digests still match."""
    held: list[Hold] = []
    for e in source.entries():
        try:
            mem = source.get(e.name)
        except (MemdirError, LookupError):
            continue
        if mem.digest is None:
            continue
        hold_ = active(source.root, e.name, mem.digest)
        if hold_ is not None:
            held.append(hold_)
        elif source.origin(e.name).users or accepted(source.internal, e.name, mem.digest):
            accept(target.internal, e.name, mem.digest)
    hold(target.root, held)
