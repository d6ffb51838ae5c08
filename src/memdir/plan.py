"""Plans: the changes extraction, consolidation and people ask of a store, as plain values.

A plan is a list of ``Put`` and ``Remove``; ``Store.apply`` carries it out as one
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
    adopt: bool = False  # write over the note without frontmatter that holds this text


@dataclass(frozen=True)
class Remove:
    """Delete a memory; its last version stays in history with the reason."""

    name: str
    reason: str = ""
    expect: str | None = None


Change = Put | Remove


def _strings(value: object, path: str) -> list[tuple[str, str]]:
    """Every string in a frontmatter value, with where it sits (``tags[2]``)."""
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in _strings(v, f"{path}.{k}")]
    if isinstance(value, (list, tuple)):
        return [x for i, v in enumerate(value) for x in _strings(v, f"{path}[{i}]")]
    return []


def screen(plan: Sequence[Change], policy: str) -> list[Change]:
    """Refuse or redact credentials in what a plan writes: the name, description, body and
    every string of the other frontmatter keys (see ``secrets``)."""
    from . import secrets
    from .memory import slugify

    if policy == "allow":
        return list(plan)
    if policy not in ("refuse", "redact"):
        raise ValueError(f"unknown secrets policy {policy!r}")
    out: list[Change] = []
    for change in plan:
        if isinstance(change, Put):
            m = change.memory
            extras = [x for k, v in m.extra.items() for x in _strings(v, str(k))]
            labels = (m.description, m.name.replace("_", " ").replace("-", " "))
            if policy == "refuse":
                secrets.refuse_secrets(
                    {
                        "name": m.name,
                        "description": m.description,
                        "body": m.body,
                        **{f"field {k!r}": v for k, v in extras},
                    },
                    labels,
                )
            else:
                name, found = secrets.redact(m.name)
                if found:
                    name = slugify(name.replace("[REDACTED:", "redacted-").replace("]", ""))
                desc, _ = secrets.redact(m.description)
                body, _ = secrets.redact(
                    m.body, [f for label in labels for f in secrets.scan_labelled(label, m.body)]
                )
                extra = {k: secrets.redact_tree(v) for k, v in m.extra.items()}
                change = replace(
                    change, memory=m.replace(name=name, description=desc, body=body, extra=extra)
                )
        out.append(change)
    return out
