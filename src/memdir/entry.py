"""``Entry``: a memory's metadata as the index and the catalogue need it, without the body;
``MEMORY.md``'s text made of entries (``render``), a file the catalogue cannot list
(``Problem``), and a search's ``Hit``.

This module does NOT read files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .gate.safetext import for_markdown
from .memory import CONFLICTED, Memory

if TYPE_CHECKING:
    from .find.vectors import Ranked

_PLAIN_FILE = re.compile(r"[\w.-]+")


def _link(fname: str) -> str:
    """A file name as a Markdown link target (percent-encoded unless plain)."""
    if _PLAIN_FILE.fullmatch(fname) and fname.isascii():
        return fname
    from urllib.parse import quote

    return quote(fname)


@dataclass(frozen=True)
class Entry:
    """A memory's metadata as the index and the catalogue need it; no body."""

    name: str
    type: str
    description: str
    created: str | None
    updated: str | None
    pinned: bool
    file: str
    warnings: tuple[str, ...] = ()

    @property
    def conflicted(self) -> bool:
        """Whether a sync left two versions of this memory for a person to choose from."""
        return any(w.startswith(CONFLICTED) for w in self.warnings)

    @cached_property
    def index_line(self) -> str:
        """This memory's line in MEMORY.md (computed once per entry object)."""
        return f"- [{self.name}]({_link(self.file)}) — {for_markdown(self.description)}"

    def to_dict(self) -> dict[str, object]:
        """The entry as JSON-able data."""
        return {
            "name": self.name,
            "type": self.type,
            "description": self.description,
            "created": self.created,
            "updated": self.updated,
            "pinned": self.pinned,
            "conflicted": self.conflicted,
            "file": self.file,
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_row(cls, row: Sequence[Any], fname: str, at: int = 4) -> Entry:
        """An entry from a metadata-cache row, its fields from ``at`` on (the cold-start
        path: no per-field setattr)."""
        entry = cls.__new__(cls)
        entry.__dict__.update(
            name=row[at],
            type=row[at + 1],
            description=row[at + 2],
            created=row[at + 3],
            updated=row[at + 4],
            pinned=row[at + 5],
            file=fname,
            warnings=tuple(row[at + 6]),
        )
        return entry


@dataclass(frozen=True)
class Hit:
    """A search result: the memory's catalogue entry and its score (higher is better: BM25, or
    BM25 fused with embedding similarity); ``memory`` reads the whole memory when first asked.
    ``scope`` names the store when several were searched as one; with ``explain``, each
    method's rank (1-based) and score where that method found it."""

    entry: Entry
    score: float
    scope: str | None = None
    bm25_rank: int | None = None
    bm25: float | None = None
    dense_rank: int | None = None
    cosine: float | None = None
    read: Callable[[Entry], Memory] | None = field(default=None, repr=False, compare=False)
    close: bool = False  # close in meaning: the cosine reaches the embedder's bar on its own
    weight: float = 1.0  # what being said in the period the question names counted for

    @property
    def name(self) -> str:
        return self.entry.name

    @cached_property
    def memory(self) -> Memory:
        """The memory, body included (read once)."""
        if self.read is None:
            raise LookupError(f"no reader for the memory {self.entry.name!r}")
        return self.read(self.entry)

    def to_dict(self, *, explain: bool = False) -> dict[str, object]:
        """The hit as JSON-able data: the entry, scope and score (and each method's rank and
        score with ``explain``)."""
        data: dict[str, object] = {**self.entry.to_dict(), "scope": self.scope}
        data["score"] = round(self.score, 4)
        if explain:
            data.update(bm25_rank=self.bm25_rank, dense_rank=self.dense_rank)
            data["bm25"] = None if self.bm25 is None else round(self.bm25, 4)
            data["cosine"] = None if self.cosine is None else round(self.cosine, 4)
            data["close"] = self.close
            data["period_weight"] = self.weight
        return data


INDEX_FILE = "MEMORY.md"  # the table of contents: one line per memory


@dataclass(frozen=True)
class Problem:
    """A file in the store that is not a usable memory, or a memory that bends a rule."""

    file: str
    reason: str
    severity: str = "error"  # "error": not listed; "warning": listed but bends a rule


def group_order(entries: Iterable[Entry], types: tuple[str, ...]) -> list[tuple[str, list[Entry]]]:
    """Entries grouped by type: configured types first, in their order, then the others."""
    groups: dict[str, list[Entry]] = {}
    for e in entries:
        groups.setdefault(e.type, []).append(e)
    ordered = [t for t in types if t in groups] + sorted(t for t in groups if t not in types)
    return [(t, sorted(groups[t], key=lambda e: e.name)) for t in ordered]


def render(entries: Iterable[Entry], types: tuple[str, ...]) -> str:
    """The text of MEMORY.md for these entries: one line per memory, grouped by type."""
    return render_groups(group_order(entries, types))


INDEX_HEAD = (  # MEMORY.md's first lines, whatever it lists
    "# Memory index\n\n<!-- Generated by memdir from the memory files in this folder."
    " Edit those files, not this one. -->"
)


def render_groups(groups: list[tuple[str, list[Entry]]]) -> str:
    """MEMORY.md's text for entries already grouped by type."""
    lines = [INDEX_HEAD]
    if not groups:
        lines += ["", "_No memories yet._"]
    for type_, items in groups:
        lines += ["", f"## {for_markdown(type_)}", ""]
        lines += [e.index_line for e in items]
    return "\n".join(lines) + "\n"


def to_hit(
    entry: Entry, ranked: Ranked, read: Callable[[Entry], Memory], scope: str | None = None
) -> Hit:
    """The search result for ``entry`` as a ranking found it."""
    return Hit(
        entry,
        ranked.score,
        scope,
        ranked.bm25_rank,
        ranked.bm25,
        ranked.dense_rank,
        ranked.cosine,
        read,
        ranked.close,
    )
