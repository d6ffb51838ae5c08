"""Standing memories: what applies whatever the question — the person's preferences, their
feedback on how to work, and pinned memories — given to a host at the start of every session
(and again after compaction), with the memory index the design calls for, so a rule said once
is followed in a later session whose prompt shares no word with it.

Per-prompt recall then adds what the question needs; ``Standing.names`` says which memories a
session already has, so they are not repeated. Held and conflicted memories never stand.
This module does NOT decide what is relevant to a question (``recall`` does).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from pathlib import Path

from .atomic import write_atomic
from .config import STANDING_TYPES
from .errors import InvalidMemory
from .layout import INTERNAL
from .memory import CONFLICT_KEY
from .recall import estimate_tokens, held_names, index_section, origin_label
from .safetext import one_line
from .scopes import Reader, Scopes

SESSIONS = "standing.json"  # .memdir: which memories each recent session was given
KEEP_SESSIONS = 50
# A plain list of rules under one imperative line: small models follow it where they passed
# over the same rules as XML elements (benchmarks/README.md, "Standing rules"); each rule
# still says where it came from.
PREAMBLE = (
    "Rules the user gave in earlier sessions (the user's own instructions). Follow every one"
    " of them in this session unless the user now says otherwise:"
)


@dataclass(frozen=True)
class Standing:
    """The session-start context: the text for the host, and the memories it holds."""

    text: str
    names: tuple[str, ...]


def standing(store: Reader, budget_tokens: int, index_lines: int, index_bytes: int) -> Standing:
    """The standing memories (pinned first, then the newest), within ``budget_tokens``, and
    the memory index after them."""
    store = Scopes.of(store)
    held = held_names(store)
    several = len(store.scopes) > 1
    located = [(sc.name if several else "", e, shown) for sc, e, shown in store.located()]
    chosen = [
        (scope, e, shown)
        for scope, e, shown in located
        if (e.pinned or e.type in STANDING_TYPES) and shown not in held and not e.conflicted
    ]
    chosen.sort(key=lambda t: t[1].updated or "", reverse=True)
    chosen.sort(key=lambda t: not t[1].pinned)
    parts: list[str] = []
    names: list[str] = []
    used = estimate_tokens(PREAMBLE) + 20
    for scope, _entry, shown in chosen:
        try:
            mem = store.get(shown)
        except (InvalidMemory, LookupError):
            continue
        if CONFLICT_KEY in mem.extra:
            continue
        where = f", {scope} store" if scope else ""
        said = one_line(mem.body.strip() or mem.description)  # one line: one rule, no structure
        origin = one_line(origin_label(store, shown))
        part = escape(f"- {said} (from: {origin}{where})", quote=False)
        cost = estimate_tokens(part)
        if used + cost > budget_tokens:
            continue  # a shorter one may still fit
        parts.append(part)
        names.append(shown)
        used += cost
    out = []
    if parts:
        out.append("<standing_memories>\n" + PREAMBLE + "\n" + "\n".join(parts))
        out[-1] += "\n</standing_memories>"
    # the catalogue of the rest: a rule above is not listed again (said twice, a small model
    # weighs the words of the rule it is told to avoid: "never npm" became "npm install")
    if not parts or any(shown not in held and shown not in names for _, _, shown in located):
        index = index_section(store, index_lines, index_bytes, omit=names)
        out.append(
            "<memory_index>\nWhat else is remembered (names and descriptions; the details come"
            " with the prompts they matter to):\n" + index + "\n</memory_index>"
        )
    return Standing("\n\n".join(out), tuple(names))


def remember_session(store: Reader, session: str, names: tuple[str, ...]) -> None:
    """Note which memories ``session`` was given at its start (its prompts skip them)."""
    target = _home(store)
    if target is None or not session:
        return
    path = target / SESSIONS
    data = _read(path)
    data.pop(session, None)
    data[session] = list(names)
    while len(data) > KEEP_SESSIONS:
        data.pop(next(iter(data)))
    try:
        write_atomic(path, json.dumps(data).encode(), sync=False)
    except OSError:
        pass  # a cache of what was sent: the prompt hook then repeats them, nothing worse


def given(store: Reader, session: str | None) -> set[str]:
    """The memories ``session`` was given at its start (none when unknown)."""
    target = _home(store)
    if target is None or not session:
        return set()
    return set(_read(target / SESSIONS).get(session, []))


def _home(store: Reader) -> Path | None:
    for _, st in Scopes.of(store).stores():
        if not st.read_only:
            return st.root / INTERNAL
    return None


def _read(path: Path) -> dict[str, list[str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
