"""Which memories the user accepted as their own instructions, by name and the digest of the
text they accepted.

A memory of a standing kind (a preference, feedback, a pinned one) stands at session start as
"the user's own instructions" only when this machine's user gave it (``provenance``: the CLI,
the UI, memdir's agent, the user's words learned from a conversation, the library) or
accepted it here (``memdir accept``). A text that came through any other door — a clone or
``git pull``, a teammate's sync, another agent over MCP, a shared team store, a hand edit —
waits until accepted. An acceptance is kept in the store's state folder (out of git's reach)
for the very text accepted: when the text changes, the acceptance lapses.
This module does NOT read memory files and does NOT decide what stands (``standing`` does).
"""

from __future__ import annotations

from pathlib import Path

from .layout import ACCEPTED
from .statefile import StateFile


def _file(state: Path) -> StateFile:
    return StateFile(state / ACCEPTED)


def accept(state: Path, name: str, digest: str) -> None:
    """The user accepts the text of ``name`` with ``digest`` as their own instruction
    (``state``: the store's state folder, ``Store.internal``)."""
    _file(state).update(lambda s: s.__setitem__(name, digest))


def accepted(state: Path, name: str, digest: str | None) -> bool:
    """Whether the user accepted exactly this text of ``name`` (``state``: the store's state
    folder, ``Store.internal``)."""
    return digest is not None and _file(state).read().get(name) == digest
