"""``memdir doctor``: a health report of a store, and the repairs that are always safe.

It reports files that are not valid memories (with the reason), memories that bend a rule,
leftover temporary files and an unfinished journal. With ``fix`` it rebuilds the
index and caches and removes stale temporary files. It does NOT modify or delete memory files.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from .store import JOURNAL, MemoryStore

STALE_TEMP_SECONDS = 3600


@dataclass
class Report:
    """What doctor found and did."""

    memories: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-able data."""
        return dict(self.__dict__)

    def lines(self) -> list[str]:
        """The report as lines for a person."""
        out = [f"{self.memories} memories."]
        out += [f"error: {e['file']}: {e['reason']}" for e in self.errors]
        out += [f"warning: {w['file']}: {w['reason']}" for w in self.warnings]
        out += [f"fixed: {f}" for f in self.fixed]
        if not self.errors and not self.warnings:
            out.append("No problems found.")
        elif self.errors:
            out.append("Files with errors are not listed; fix or move them by hand.")
        return out


def diagnose(store: MemoryStore, *, fix: bool = False) -> Report:
    """Check ``store``; with ``fix`` also repair the index, caches and temporary files."""
    report = Report()
    stale_temps = []
    now = time.time()
    for folder in (store.root, store.internal):
        for de in os.scandir(folder):
            if (de.name.startswith((".tmp-", ".meta-")) and de.is_file(follow_symlinks=False)
                    and now - de.stat(follow_symlinks=False).st_mtime > STALE_TEMP_SECONDS):
                stale_temps.append(de.path)
    if fix:
        store.rebuild()
        for path in stale_temps:
            os.unlink(path)
            report.fixed.append(f"removed stale temporary file {os.path.basename(path)}")
        report.fixed.append("rebuilt MEMORY.md and the metadata cache")
    elif stale_temps:
        report.warnings.append({"file": ".", "reason": f"{len(stale_temps)} stale"
                                " temporary files (run 'memdir doctor --fix')"})
    if (store.internal / JOURNAL).exists():
        report.errors.append({"file": f".memdir/{JOURNAL}",
                              "reason": "an unfinished operation (reopen the store to finish it)"})
    for p in store.problems():
        target = report.errors if p.severity == "error" else report.warnings
        target.append({"file": p.file, "reason": p.reason})
    report.memories = len(store.entries())
    return report
