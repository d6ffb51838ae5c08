"""Memories held back from recall until a person looks: what arrived from elsewhere (a sync
under ``review = "ask"``, a pin set by another author, a look-alike of an existing name, an
instruction-shaped text) stays in the folder, as git and the remote have it, but is never
shown to a model until it is approved in the review queue.

A hold is kept in ``<state>/held.json`` by name, with the digest of the text it holds: when
the text changes again (memdir writes it, or a person edits it by hand here) the hold lapses,
since the new text is this machine's own. This module does NOT decide what to hold (``sync``
and extraction do) and does NOT read memory files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .layout import HELD, state_dir
from .statefile import StateFile


@dataclass(frozen=True)
class Hold:
    """Why a memory's text is held, who sent it, and the review proposal that decides it."""

    name: str
    digest: str
    why: str
    by: str = ""
    proposal: str = ""


def _file(root: Path) -> StateFile:
    return StateFile(state_dir(root) / HELD)


def holds(root: Path) -> dict[str, Hold]:
    """Every hold of the store at ``root`` (lapsed ones included: ``active`` tells)."""
    out = {}
    for name, d in _file(root).read().items():
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

    _file(root).update(change)


def release(root: Path, name: str) -> None:
    """Let ``name`` be recalled again (approved, or decided otherwise)."""
    if name in holds(root):
        _file(root).update(lambda s: s.pop(name, None))


def active(root: Path, name: str, digest: str | None) -> Hold | None:
    """The hold on ``name`` if it still holds the text with ``digest``."""
    found = holds(root).get(name)
    return found if found is not None and digest is not None and found.digest == digest else None
