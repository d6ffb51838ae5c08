"""What a consolidation may do to memories, checked by memdir rather than trusted to the model.

A merge states the same fact once: every specific of every memory it merges — names with
digits or separators, numbers, versions, paths, schema and table names, code spans — must
survive in the merged text, and the merged memory keeps a type one of its sources had; a
plan that folds distinct facts into a generalisation loses specifics and is refused. A
retirement in a run nobody watches (after a turn) never takes a memory learned or edited
since the last run (the same run may have just learned it), nor one the person stated
themselves (typed on the command line, in the UI, or written by hand); a run the person
started shows them its plan. This module does NOT ask a model or apply anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..memory import Memory

# a specific: a word holding a digit, or joined by _ . / : @ # - with letters on both sides
# of a digit-free separator (billing_v2, auth-db-59, ledger.invoices, src/app.py, PG16, 8080),
# a code span, or an identifier written in capitals or camelCase (APP_KEY, smartRetry)
_CODE = re.compile(r"`([^`\n]{1,80})`")
_TOKEN = re.compile(r"[A-Za-z0-9][\w.:/@#+-]*[A-Za-z0-9]|\d")
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2,}")
USER_STATED = ("cli", "ui", "hand")  # origins that are the person's own words


def specifics(text: str) -> set[str]:
    """The specific tokens of ``text`` (lowercased), which a merge must keep."""
    found = {m.group(1).strip().lower() for m in _CODE.finditer(text)}
    for m in _TOKEN.finditer(_CODE.sub(" ", text)):
        token = m.group(0).rstrip(".:")
        if (
            any(ch.isdigit() for ch in token)
            or re.search(r"\w[_./@#:]\w", token)
            or ("-" in token and len(token) > 3 and sum(ch.isupper() for ch in token) >= 1)
            or (_CAMEL.search(token) and len(token) > 2)
        ):
            found.add(token.lower())
    return found


def lost_in_merge(sources: Iterable[Memory], into: Memory) -> list[str]:
    """The specifics of ``sources`` that the merged memory ``into`` no longer says."""
    kept = f"{into.name} {into.description} {into.body}".lower()
    lost: list[str] = []
    for mem in sources:
        for token in sorted(specifics(f"{mem.description}\n{mem.body}")):
            if token not in kept and token not in lost:
                lost.append(token)
    return lost


def merge_problem(sources: list[Memory], into: Memory) -> str | None:
    """Why memdir refuses this merge (None: it only tidies)."""
    types = {m.type for m in sources}
    if len(types) > 1:
        return f"the memories are of different kinds ({', '.join(sorted(types))}): not one fact"
    if into.type not in types:
        return f"it would change the type to {into.type} (the memories are {types.pop()})"
    lost = lost_in_merge(sources, into)
    if lost:
        shown = ", ".join(lost[:5]) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
        return f"the merged text drops what the memories said ({shown}): distinct facts"
    return None


def retire_problem(recent: bool, origin: str, pinned: bool) -> str | None:
    """Why memdir refuses to retire a memory (None: it may): pinned, ``recent`` (learned or
    edited since the last run), or stated by the person."""
    if pinned:
        return "it is pinned"
    if recent:
        return "it was learned or edited since the last consolidation"
    if origin in USER_STATED:
        return f"the person stated it ({origin})"
    return None
