"""Plans: the changes extraction, consolidation and people ask of a store, as plain values.

A plan is a list of ``Put`` and ``Remove``; ``Store.apply`` carries it out as one
transaction. ``screen`` refuses or redacts credentials in what a plan would write.
``check_memory`` and ``settle_put`` are how every backend turns a plan's writes into
memories.
This module does NOT touch files.
"""

from __future__ import annotations

import secrets as _random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from . import memory as memfmt
from .errors import InvalidMemory
from .memory import Memory

if TYPE_CHECKING:
    from .config import Config


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
    from .gate import secrets
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


def new_op_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{_random.token_hex(3)}"


def check_memory(memory: Memory, config: Config) -> Memory:
    """Validate a memory as a write would (name, type, description, size) without writing;
    returns it normalised. Every backend writes through this check."""
    new = memfmt.validate_new(memory.replace(name=memfmt.validate_name(memory.name)), config.types)
    size = len(memfmt.dumps(new.replace(created=memfmt.now(), updated=memfmt.now())).encode())
    if size > config.max_file_bytes:
        raise InvalidMemory(
            f"memory {new.name!r} would be {size / 1024:.0f} KiB, over the"
            f" {config.max_file_bytes // 1024} KiB limit — shorten the body or"
            " split it into several memories"
        )
    return new


def settle_put(
    change: Put, name: str, current: Memory | None, config: Config, stamp: str
) -> Memory | None:
    """What a ``Put`` writes over ``current`` (None: nothing there): validated, the keys the
    current memory has and the new one lacks carried over (redacted) unless told not to,
    ``created`` kept and ``updated`` stamped; None when it changes nothing. Every backend
    turns a plan's writes into memories through this."""
    new = memfmt.validate_new(change.memory.replace(name=name), config.types)
    if current is not None and change.merge_extra:  # never carry a secret along
        from .gate.secrets import redact_tree

        kept = {k: redact_tree(v) for k, v in current.extra.items()}
        new = new.replace(extra={**kept, **new.extra})
    if current is not None:
        unchanged = new.replace(created=current.created, updated=current.updated)
        if memfmt.dumps(unchanged) == memfmt.dumps(current):
            return None
    created = (current.created if current else None) or new.created or stamp
    new = new.replace(created=created, updated=stamp)
    if len(memfmt.dumps(new).encode()) > config.max_file_bytes:
        check_memory(new, config)  # raises, saying by how much
    return new
