"""Where a memory came from, as memdir itself recorded it: never what a file, a model or a
remote says of itself.

Every write memdir makes is an operation in the store's log, with its source (the CLI, the
UI, an MCP client, the agent's tool, extraction from a conversation, an import, a sync with
the commit's author) and the digest of the text it wrote. A memory's origin is the source of
the last logged change whose digest is the text on disk now; a text no logged change wrote
was edited by hand here (or came from somewhere memdir did not see). A field in the file
claiming an origin would be written by whoever wrote the file, so none is trusted.
This module does NOT read files other than the log, and does NOT write anything.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HAND = "hand"  # the file's text is not one memdir wrote: a person edited it here


@dataclass(frozen=True)
class Origin:
    """How a memory's current text was written: ``label`` as recall shows it (``cli``,
    ``mcp:claude-code``, ``learned``, ``sync:alice@example.com``, ``hand``…), when, and the
    operation that wrote it (None for a hand edit)."""

    label: str
    at: str | None = None
    op: str | None = None

    @property
    def outside(self) -> bool:
        """Whether the text came from someone other than this machine's user (a remote)."""
        return self.label.startswith("sync")

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.label, "at": self.at, "op": self.op}


def label_of(source: str, by: str | None = None) -> str:
    """The origin a logged source stands for."""
    base, _, approved = source.partition(", approved")
    head = base.split(":", 1)[0]
    if head == "sync":
        label = f"sync:{by}" if by else base
    elif head == "extract":
        label = "learned"
    elif base in ("cli", "edit", "flag", "user"):
        label = "cli"
    elif base in ("agent", "chat"):
        label = "agent"
    elif base == "doctor":
        label = HAND  # doctor adopted a note a person dropped into the folder
    else:
        label = base or "api"
    return label + (" (approved)" if approved else "")


class Ledger:
    """The last logged change of each memory, read from the log once and then only what was
    appended since (the log is append-only)."""

    def __init__(self, log_path: Path) -> None:
        self.path = log_path
        self._seen = 0  # bytes of the log read
        self._inode: int | None = None
        self._last: dict[str, tuple[str | None, Origin]] = {}

    def origin(self, name: str, digest: str | None) -> Origin:
        """The origin of ``name`` whose text on disk has ``digest``."""
        self._catch_up()
        got = self._last.get(name)
        if got is None or digest is None or got[0] != digest:
            return Origin(HAND)
        return got[1]

    def _catch_up(self) -> None:
        try:
            st = os.stat(self.path)
        except OSError:
            return
        if st.st_ino != self._inode or st.st_size < self._seen:  # replaced: read it all
            self._seen, self._inode, self._last = 0, st.st_ino, {}
        if st.st_size == self._seen:
            return
        with open(self.path, "rb") as fh:
            fh.seek(self._seen)
            data = fh.read(st.st_size - self._seen)
        end = data.rfind(b"\n") + 1  # a torn last line waits for the rest
        self._seen += end
        for line in data[:end].splitlines():
            try:
                op = json.loads(line)
                for ch in op.get("changes", ()):
                    origin = Origin(label_of(op["source"], ch.get("by")), op.get("time"), op["id"])
                    self._last[ch["name"]] = (ch.get("digest"), origin)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
