"""What the user decided about a text that came through a door, kept by name and the digest
of the very text decided on, in the store's state folder (out of git's reach): when the text
changes, the decision lapses.

- **Held** back from recall until a person looks (``held.json``): what arrived from elsewhere
  (a sync under ``review = "ask"``, a pin set by another author, a look-alike of an existing
  name, an instruction-shaped text) stays in the folder, as git and the remote have it, but
  is never shown to a model until it is approved in the review queue. A new text (memdir
  writes it, or a person edits it by hand here) is this machine's own: the hold lapses.
- **Accepted** as the user's own instruction (``accepted.json``, ``memdir accept``). A memory
  of a standing kind (a preference, feedback, a pinned one) stands at session start as "the
  user's own instructions" only when this machine's user gave it (``provenance``: the CLI,
  the UI, memdir's agent, the user's words learned from a conversation, the library) or
  accepted it here. A text that came through any other door — a clone or ``git pull``, a
  teammate's sync, another agent over MCP, a shared team store, a hand edit — waits until
  accepted.

This module does NOT decide what to hold (``sync`` and extraction do) or what stands
(``standing`` does), and does NOT read memory files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..disk.layout import ACCEPTED, HELD, state_dir
from ..disk.statefile import StateFile


@dataclass(frozen=True)
class Hold:
    """Why a memory's text is held, who sent it, and the review proposal that decides it."""

    name: str
    digest: str
    why: str
    by: str = ""
    proposal: str = ""


def _held(root: Path) -> StateFile:
    return StateFile(state_dir(root) / HELD)


def holds(root: Path) -> dict[str, Hold]:
    """Every hold of the store at ``root`` (lapsed ones included: ``active`` tells)."""
    out = {}
    for name, d in _held(root).read().items():
        if isinstance(d, dict) and isinstance(d.get("digest"), str):
            out[name] = Hold(
                name, d["digest"], str(d.get("why", "")), str(d.get("by", "")),
                str(d.get("proposal", "")),
            )  # fmt: skip
    return out


def hold(root: Path, holds_: list[Hold]) -> None:
    """Hold these texts back from recall."""
    if not holds_:
        return

    def change(s: dict[str, object]) -> None:
        for h in holds_:
            s[h.name] = {"digest": h.digest, "why": h.why, "by": h.by, "proposal": h.proposal}

    _held(root).update(change)


def release(root: Path, name: str) -> None:
    """Let ``name`` be recalled again (approved, or decided otherwise)."""
    if name in holds(root):
        _held(root).update(lambda s: s.pop(name, None))


def active(root: Path, name: str, digest: str | None) -> Hold | None:
    """The hold on ``name`` if it still holds the text with ``digest``."""
    found = holds(root).get(name)
    return found if found is not None and digest is not None and found.digest == digest else None


def _accepted(state: Path) -> StateFile:
    return StateFile(state / ACCEPTED)


def accept(state: Path, name: str, digest: str) -> None:
    """The user accepts the text of ``name`` with ``digest`` as their own instruction
    (``state``: the store's state folder, ``Store.internal``)."""
    _accepted(state).update(lambda s: s.__setitem__(name, digest))


def accepted(state: Path, name: str, digest: str | None) -> bool:
    """Whether the user accepted exactly this text of ``name`` (``state``: the store's state
    folder, ``Store.internal``)."""
    return digest is not None and _accepted(state).read().get(name) == digest


def accepted_once(state: Path, name: str) -> bool:
    """Whether the user accepted some text of ``name`` (this one or an earlier one)."""
    return name in _accepted(state).read()
