"""What one sync did, as the person reads it: what was committed, merged (added, updated,
retired), held for review, left out, changed beside the memories, conflicted, pushed.

This module does NOT sync anything (``sync`` does).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Report:
    """What one sync did."""

    committed: str | None = None  # the first line of the local commit
    merged: list[str] = field(default_factory=list)  # memories the merge changed here
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # files beside the memories it changed
    left_out: list[str] = field(default_factory=list)  # what --skip kept out of the merge
    held: list[str] = field(default_factory=list)  # arrivals held back from recall for review
    notes: list[str] = field(default_factory=list)  # anything else the person should know
    conflicts: list[str] = field(default_factory=list)  # now marked conflicted
    kept: list[str] = field(default_factory=list)  # edited on one side, retired on the other
    pushed: bool = False
    remote: str = ""
    offline: str | None = None  # why the remote could not be reached

    def lines(self) -> list[str]:
        out = []
        if self.committed:
            out.append(f"Committed: {self.committed}")
        if self.merged:
            counts = f"{len(self.added)} added, {len(self.updated)} updated,"
            out.append(
                f"Merged from {self.remote}: {', '.join(self.merged)}"
                f" ({counts} {len(self.retired)} retired)"
            )
        if self.held:
            out.append(
                f"Held for review, not recalled until approved: {'; '.join(self.held)}"
                " — 'memdir review'"
            )
        if self.left_out:
            out.append(f"Left out of the merge: {', '.join(self.left_out)}")
        for fname in self.changed:
            out.append(f"Changed by {self.remote}, not a memory: {fname} — {_unmemory(fname)}")
        for name in self.conflicts:
            out.append(
                f"Conflict: {name} was changed on both sides — the other version is in"
                f" history; 'memdir resolve {name}' when you have looked"
            )
        for name in self.kept:
            out.append(f"Kept {name}: edited on one side, retired on the other (the edit wins)")
        if self.offline:
            out.append(f"Not synced: {self.offline}")
        elif self.pushed:
            out.append(f"Pushed to {self.remote}.")
        out += self.notes
        if not out:
            out.append("Already in sync.")
        return out


def _unmemory(fname: str) -> str:
    if fname == "config.toml":
        return (
            "its settings are ignored until you accept them (look at the file, then 'memdir"
            " trust' with the store's folder)"
        )
    return "memdir's own merge rules stand (.git/info/attributes), whatever it says"
