"""What the web app's pages show: the rows of a list, the lines of the timeline, a memory's
frontmatter, one version's text and the diff of two, a body as Markdown with raw HTML off,
and the small helpers of a page's forms.
This module does NOT serve requests (``app``)."""

from __future__ import annotations

import difflib
import time
from dataclasses import dataclass
from typing import Any, TypedDict
from urllib.parse import urlencode

from starlette.responses import RedirectResponse, Response

from memdir import memory as memfmt
from memdir.entry import Entry
from memdir.episodes import Turn
from memdir.errors import MemdirError
from memdir.frontmatter import split_frontmatter
from memdir.recalllog import RecallEntry, entries
from memdir.store import Store


@dataclass(frozen=True)
class Event:
    """One line of the activity timeline: a logged operation or a recall."""

    time: str
    scope: str
    source: str
    summary: str
    changes: list[tuple[str, str, str]]  # action, name, why (a merge's or retirement's reason)
    kind: str  # "change" or "recall"


class ShownRecall(RecallEntry):
    """A recall as the recall-log page shows it: with the store it was logged in."""

    store: str


@dataclass
class Row:
    """One memory in a list: where it is and what it says."""

    scope: str
    entry: Entry
    shown: str
    score: float | None = None
    explain: str = ""


class Use(TypedDict):
    """How a memory was used, as the recall logs tell: recalled for prompts, given at session
    starts, and when last either."""

    recalled: int
    stood: int
    last: str | None


def unused_since(use: Use | None, days: int) -> bool:
    """Neither recalled nor given at a session start in the last ``days`` days."""
    if use is None or use["last"] is None:
        return True
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - days * 86400))
    return use["last"] < since


def recalled_line(entry: RecallEntry) -> str:
    """A recall as one timeline line: the memories by name, the episodes it added counted
    (an episode is a turn of a conversation, not a memory)."""
    names = [m["name"] for m in entry["memories"] if m.get("scope") != "episode"]
    said = len(entry["memories"]) - len(names)
    parts = [", ".join(names)] if names else []
    if said:
        parts.append(f"{said} earlier conversation turn{'s' if said != 1 else ''}")
    return "recalled " + (" and ".join(parts) or "nothing")


def back_to(path: str, done: str) -> Response:
    return RedirectResponse(f"{path}?{urlencode({'done': done})}", status_code=303)


def explain_hit(hit: Any) -> str:
    bm25 = "—" if hit.bm25_rank is None else f"#{hit.bm25_rank} ({hit.bm25:.2f})"
    dense = "—" if hit.dense_rank is None else f"#{hit.dense_rank} ({hit.cosine:.3f})"
    return f"BM25 {bm25} · dense {dense}"


def frontmatter_of(mem: memfmt.Memory | None) -> str:
    if mem is None:
        return ""
    head, _ = split_frontmatter(memfmt.dumps(mem))
    return head


def version_text(store: Store, name: str, mem: memfmt.Memory | None, which: str) -> str:
    if which == "now":
        return memfmt.dumps(mem) if mem is not None else ""
    return store.version_text(name, int(which.lstrip("v")))


def version_diff(
    store: Store, name: str, mem: memfmt.Memory | None, a: str, b: str
) -> list[tuple[str, str]] | str:
    """The lines of a diff between two versions ("now" or a number), each with its kind."""
    try:
        before, after = version_text(store, name, mem, a), version_text(store, name, mem, b)
    except (MemdirError, ValueError):
        return f"no such version: {a} or {b}"
    out = []
    for line in difflib.unified_diff(
        before.splitlines(), after.splitlines(), f"{name} {a}", f"{name} {b}", lineterm=""
    ):
        kind = "add" if line.startswith("+") else "del" if line.startswith("-") else "ctx"
        out.append((kind, line))
    return out or [("ctx", "(the two versions are the same)")]


_md: Any = None


def markdown(text: str) -> str:
    """A memory body as HTML: CommonMark with raw HTML off (the text cannot inject markup)."""
    global _md
    if _md is None:
        from markdown_it import MarkdownIt

        _md = MarkdownIt("commonmark", {"html": False, "linkify": False})
        _md.validateLink = lambda url: url.lower().startswith(("http://", "https://"))
    html: str = _md.render(text)
    return html


def uses_in(stores: list[Store]) -> dict[str, Use]:
    """How each memory was used, from these stores' recall logs together: recalled, or
    standing at a session start (``start:<host>`` entries), and when last (each log keeps
    about its last 4,000 recalls)."""
    out: dict[str, Use] = {}
    for store in stores:
        for e in entries(store.internal):
            stood = e["source"].startswith("start:")
            for m in e["memories"]:
                if m.get("scope") == "episode":
                    continue
                use = out.setdefault(m["name"], {"recalled": 0, "stood": 0, "last": None})
                use["stood" if stood else "recalled"] += 1
                if use["last"] is None or e["time"] > use["last"]:
                    use["last"] = e["time"]
    return out


def turns_in(stores: list[Store]) -> dict[str, Turn]:
    """These stores' kept turns, by their ref (what a recall names)."""
    from memdir.episodes import Episodes

    out: dict[str, Turn] = {}
    for store in stores:
        kept = Episodes(store.internal, store.config)
        try:
            out.update((t.ref, t) for t in kept.turns())
        finally:
            kept.close()
    return out
