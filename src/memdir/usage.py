"""The usage log: one JSON line per model call, and the sums ``memdir stats`` shows.

Every call records its purpose (select, extract, consolidate, agent…), provider, model, tokens
in and out, latency and whether it failed, in ``<state>/usage.jsonl``. This module does NOT
talk to a model, so reading the log never imports an SDK.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .disk.statefile import append_line, read_lines


@dataclass
class UsageTotals:
    """Summed usage of one purpose."""

    purpose: str
    calls: int = 0
    failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0

    def to_dict(self) -> dict[str, object]:
        """The totals as JSON-able data."""
        return dict(self.__dict__)


class UsageLog:
    """Append-only usage records in a JSONL file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def record(
        self,
        *,
        purpose: str,
        provider: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        latency_ms: float,
        ok: bool = True,
    ) -> None:
        """Append one call's usage (best effort: a read-only store still works)."""
        row = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "purpose": purpose,
            "provider": provider,
            "model": model,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "latency_ms": round(latency_ms, 1),
            "ok": ok,
        }
        append_line(self.path, row)

    def rows(self) -> list[dict[str, Any]]:
        """Every recorded call, oldest first (torn lines skipped)."""
        return read_lines(self.path)

    def totals(self) -> list[UsageTotals]:
        """Usage summed per purpose, biggest token users first."""
        sums: dict[str, UsageTotals] = {}
        for row in self.rows():
            t = sums.setdefault(row.get("purpose", "?"), UsageTotals(row.get("purpose", "?")))
            t.calls += 1
            t.failures += 0 if row.get("ok", True) else 1
            t.input_tokens += int(row.get("input_tokens", 0))
            t.output_tokens += int(row.get("output_tokens", 0))
            t.latency_ms += float(row.get("latency_ms", 0.0))
        return sorted(sums.values(), key=lambda t: -(t.input_tokens + t.output_tokens))
