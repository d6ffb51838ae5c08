"""Plans: the changes extraction, consolidation and people ask of a store, as plain values.

A plan is a list of ``Put`` and ``Remove``; ``MemoryStore.apply`` carries it out as one
transaction. ``screen`` refuses or redacts credentials in what a plan would write.
This module does NOT touch files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from .memory import Memory


@dataclass(frozen=True)
class Put:
    """Create or update a memory. ``expect`` is the digest the caller read, if any."""

    memory: Memory
    reason: str = ""
    expect: str | None = None
    merge_extra: bool = True  # keep keys the current file has and the new memory lacks


@dataclass(frozen=True)
class Remove:
    """Delete a memory; its last version stays in history with the reason."""

    name: str
    reason: str = ""
    expect: str | None = None


Change = Put | Remove


def screen(plan: Sequence[Change], policy: str) -> list[Change]:
    """Refuse or redact credentials in what a plan writes (see ``secrets``)."""
    from . import secrets

    if policy == "allow":
        return list(plan)
    if policy not in ("refuse", "redact"):
        raise ValueError(f"unknown secrets policy {policy!r}")
    out: list[Change] = []
    for change in plan:
        if isinstance(change, Put):
            m = change.memory
            if policy == "refuse":
                secrets.refuse_secrets({"description": m.description, "body": m.body})
            else:
                desc, _ = secrets.redact(m.description)
                body, _ = secrets.redact(m.body)
                change = replace(change, memory=m.replace(description=desc, body=body))
        out.append(change)
    return out
