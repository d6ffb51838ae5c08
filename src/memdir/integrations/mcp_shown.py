"""What an MCP client is shown of a memory: the text it reads by name (``as_read``: held,
planted or marked with where it came from, as the gate says), a listing's description
(``described``), the scope it is in (``where``), and the tools' argument helper (``pick``).
This module does NOT decide what a model may see (``policy``)."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from ..entry import Entry
from ..gate.safetext import one_line, visible
from ..memory import dumps
from ..policy import HELD, Policy, planted_description
from ..scopes import PROJECT, Scopes


def as_read(scopes: Scopes, name: str) -> str:
    """A memory as a client reading it by name gets it: its file, then where it came from
    (a text from elsewhere is marked as such); a held one only says it is held."""
    mem = scopes.get(name)
    verdict = Policy(scopes).verdict(name, mem)
    if not verdict.model and verdict.why == HELD:
        return held_note(name)
    if not verdict.model:
        return f"{name}: not shown — {verdict.why}; the user sees it with 'memdir show {name}'"
    origin = scopes.origin(name, mem.digest)
    text = visible(dumps(mem))  # (nothing a person cannot see: tag characters, bidi marks)
    return text + f"\n(from: {origin.label}" + (f", {origin.at})" if origin.at else ")")


def held_note(name: str) -> str:
    """What a client asking for a held memory by name gets instead of its text."""
    return (
        f"{name} is held for review: it came from elsewhere (a sync, a repository, another"
        " author) and is not shown until the user approves it ('memdir review')."
    )


def pick(what: str, *values: Any) -> Any:
    """The first of several accepted argument names that was given."""
    for v in values:
        if v is not None and v != "":
            return v
    raise ToolError(f"missing {what} — pass it as {what!r}")


def described(scopes: Scopes, entry: Entry) -> str:
    """An entry's description as a listing shows a model: one that a door brought and that
    orders the agent about is not shown, and the listing says why."""
    if planted_description(scopes, entry.name, entry.description):
        return "(not shown: it reads as an instruction to an agent, not the user's words)"
    return one_line(entry.description)


def where(scopes: Scopes, shown: str) -> str:
    """ ", user" (or ", shared:…") for a memory outside the project's store."""
    scope = scopes.scope_of(shown)
    return "" if scope == PROJECT else f", {scope}"
