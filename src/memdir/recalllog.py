"""The recall log: what was recalled, for which question, from where, and why.

Every recall that injects memories (the agent, the prompt hook, MCP's ``recall`` tool; not
``memdir recall``, which shows what would be injected) and every session start a hook served
adds one JSON line to ``<state>/recall.jsonl``: when, the source (and the session), the
question with secrets redacted, the path (the model's pick, or search), each memory with its
scope and search score, and what it cost: the tokens the injected text takes and the
milliseconds the recall took. The log is bounded: past ``MAX_BYTES`` it is rotated to
``recall.1.jsonl`` (the one before that is dropped). ``recall_log = false`` turns it off.
This module does NOT choose memories.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from .disk.layout import RECALL_LOG
from .disk.statefile import append_line, read_lines
from .gate.secrets import redact

MAX_BYTES = 1 << 20  # about 2,000 recalls per file
MAX_QUESTION = 2000


class Recalled(TypedDict):
    """One memory a recall injected, and why."""

    name: str
    scope: str | None
    score: float | None  # the search score, when search ranked it


class RecallEntry(TypedDict):
    """One line of the recall log."""

    time: str
    source: str
    session: str | None
    question: str
    path: str  # "llm": the memory model chose; "search"; "search-fallback": the model failed
    memories: list[Recalled]
    note: str
    tokens: int | None  # of the text injected (None: not known, a line of an older version)
    ms: int | None  # how long choosing and rendering took


def record(
    internal: Path,
    *,
    source: str,
    question: str,
    path: str,
    memories: list[Recalled],
    note: str = "",
    session: str | None = None,
    tokens: int | None = None,
    ms: int | None = None,
    max_bytes: int = MAX_BYTES,
) -> None:
    """Append one recall (best effort: a read-only store recalls without logging); past
    ``max_bytes`` the log is rotated."""
    text, _ = redact(question[-MAX_QUESTION:])
    entry: RecallEntry = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "source": source,
        "session": session,
        "question": text,
        "path": path,
        "memories": memories,
        "note": note,
        "tokens": tokens,
        "ms": ms,
    }
    log = internal / RECALL_LOG
    with contextlib.suppress(OSError):  # (not rotated: the next entry tries again)
        if log.exists() and log.stat().st_size > max_bytes:
            os.replace(log, log.with_name("recall.1.jsonl"))
    append_line(log, entry)


def entries(internal: Path, limit: int | None = None) -> list[RecallEntry]:
    """Logged recalls, newest first (torn lines skipped)."""
    out: list[RecallEntry] = []
    for name in (RECALL_LOG, "recall.1.jsonl"):
        for data in reversed(read_lines(internal / name)):
            if isinstance(data.get("time"), str):
                out.append(_entry(data))
            if limit is not None and len(out) >= limit:
                return out
    return out


def _entry(data: dict[str, Any]) -> RecallEntry:
    """A logged line as a ``RecallEntry`` (fields a damaged line lacks are empty)."""
    memories: list[Recalled] = [
        {"name": str(m.get("name", "")), "scope": m.get("scope"), "score": m.get("score")}
        for m in data.get("memories") or []
        if isinstance(m, dict)
    ]
    return {
        "time": str(data["time"]),
        "source": str(data.get("source", "")),
        "session": data.get("session"),
        "question": str(data.get("question", "")),
        "path": str(data.get("path", "")),
        "memories": memories,
        "note": str(data.get("note", "")),
        "tokens": _count(data.get("tokens")),
        "ms": _count(data.get("ms")),
    }


def _count(value: object) -> int | None:
    """A whole number a line holds (None: absent, or not one)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class Cost:
    """What the recalls of one source (``hook:claude-code``, ``start:codex``, ``agent``…)
    cost: how many, how many injected something, their tokens and milliseconds."""

    source: str
    recalls: int = 0
    injected: int = 0  # recalls that put something into the context
    tokens: list[int] = field(default_factory=list)  # of each recall that says
    ms: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """The cost as JSON-able data (percentiles of what was recorded; None when nothing)."""
        return {
            "source": self.source,
            "recalls": self.recalls,
            "injected": self.injected,
            "tokens_mean": round(statistics.fmean(self.tokens)) if self.tokens else None,
            "tokens_max": max(self.tokens, default=None),
            "tokens_total": sum(self.tokens),
            "ms_p50": _percentile(self.ms, 0.5),
            "ms_p95": _percentile(self.ms, 0.95),
        }


def costs(rows: Sequence[RecallEntry]) -> list[Cost]:
    """What the recalls cost, per source, the most frequent first. A recall of an older
    version (no tokens or time recorded) counts, without a cost."""
    out: dict[str, Cost] = {}
    for e in rows:
        c = out.setdefault(e["source"], Cost(e["source"]))
        c.recalls += 1
        c.injected += bool(e["memories"]) and e["tokens"] != 0
        if e["tokens"] is not None:
            c.tokens.append(e["tokens"])
        if e["ms"] is not None:
            c.ms.append(e["ms"])
    return sorted(out.values(), key=lambda c: (-c.recalls, c.source))


def _percentile(values: list[int], q: float) -> int | None:
    """The nearest-rank percentile ``q`` of ``values`` (None: no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
