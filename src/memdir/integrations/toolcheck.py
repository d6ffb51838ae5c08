"""The reminder before a tool call (Claude Code's and Codex's ``PreToolUse``): the pending
write, edit, patch or command held against the conventions that stand for the user (only the
rules ``standing`` gives a session: the user's own, one per slot), and a short reminder of the
rules it would break — nothing when it breaks none.

What a tool is about to write is read from its input as the hosts send it: Claude Code's
``Write`` (``content``), ``Edit`` (``new_string``), ``MultiEdit`` (``edits``), and a shell
command (``command``); Codex's ``apply_patch`` (the patch's added lines, file by file) and
shell command. Python files are checked by ``conventions.Convention.breaks``; a command is
checked against the tooling rules (the package manager, the test runner…).
This module does NOT decide what stands (``standing`` does) nor run the hook (``hooks``).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from html import escape
from typing import Any

from ..code import conventions
from ..gate.safetext import one_line

CODE_SUFFIXES = (".py", ".pyi")
MAX_RULES = 3  # rules a reminder names at the most
MAX_FINDINGS = 2  # findings named per rule


@dataclass(frozen=True)
class Pending:
    """What a tool call is about to do: files and the code written to each, or a command."""

    code: tuple[tuple[str, str], ...] = ()  # (path, code)
    command: str = ""


def pending(tool_name: str, tool_input: dict[str, Any]) -> Pending:
    """The code or command a tool call carries (nothing, for a tool that writes none)."""
    path = str(tool_input.get("file_path") or tool_input.get("path") or "")
    if tool_name == "Write":
        return Pending(code=((path, str(tool_input.get("content") or "")),))
    if tool_name == "Edit":
        return Pending(code=((path, str(tool_input.get("new_string") or "")),))
    if tool_name == "MultiEdit":
        edits = tool_input.get("edits")
        edits = edits if isinstance(edits, list) else []
        parts = [str(e.get("new_string") or "") for e in edits if isinstance(e, dict)]
        return Pending(code=((path, "\n\n".join(parts)),))
    command = tool_input.get("command")
    if isinstance(command, list):  # Codex may send argv
        command = " ".join(str(c) for c in command)
    if not isinstance(command, str):
        return Pending()
    if "*** Begin Patch" in command:
        return Pending(code=_patched(command))
    return Pending(command=command)


_FILE = re.compile(r"^\*\*\* (?:Add|Update) File: (.+)$")


def _patched(patch: str) -> tuple[tuple[str, str], ...]:
    """The lines a Codex patch adds, file by file."""
    out: dict[str, list[str]] = {}
    current = None
    for line in patch.splitlines():
        m = _FILE.match(line)
        if m:
            current = m.group(1).strip()
            out.setdefault(current, [])
        elif current is not None and line.startswith("+"):
            out[current].append(line[1:])
    return tuple((path, "\n".join(lines)) for path, lines in out.items())


_DEF = re.compile(r"^(\s*)(@.*|(?:async\s+)?def\s+.*|class\s+.*)$")


def parsable(fragment: str) -> str:
    """A fragment of Python (an edit's new text) as code that parses: dedented; if it still
    does not parse, its decorator, ``def`` and ``class`` lines with a body of ``...`` each,
    and its import lines."""
    import ast

    text = textwrap.dedent(fragment)
    try:
        ast.parse(text)
        return text
    except (SyntaxError, ValueError):
        pass
    lines: list[str] = []
    for line in text.splitlines():
        m = _DEF.match(line)
        if m and m.group(2).startswith("@"):
            lines.append(m.group(2))
        elif m and m.group(2).rstrip().endswith(":"):
            lines += [m.group(2).rstrip(), "    ..."]
        elif re.match(r"^\s*(?:import|from)\s+\w", line):
            lines.append(line.strip())
    return "\n".join(lines)


def findings(rules: list[tuple[str, str]], work: Pending) -> list[tuple[str, str, list[str]]]:
    """(rule's name, rule's text, what breaks it) for each rule (name, text) the pending
    work breaks, in the rules' order."""
    out = []
    for name, text in rules:
        conv = conventions.one(text)
        if conv is None:
            continue
        broken: list[str] = []
        if conv.subject == "tooling":
            broken = conv.breaks(work.command) if work.command else []
        elif conv.aspect.startswith("import "):
            continue  # an edit is a part of a file: a missing import may be elsewhere
        else:
            for path, code in work.code:
                if path.endswith(CODE_SUFFIXES) and code.strip():
                    where = path.rsplit("/", 1)[-1]
                    broken += [f"{where} {b}" for b in conv.breaks(parsable(code))]
        if broken:
            out.append((name, text, broken))
    return out


def reminder(found: list[tuple[str, str, list[str]]]) -> str:
    """The reminder for the host: the rules the pending call breaks, and where."""
    lines = [
        "<memory_reminder>",
        "This tool call breaks a rule the user gave for this project (their own instruction,"
        " from memory); fix it in this turn unless the user now says otherwise:",
    ]
    for _, text, broken in found[:MAX_RULES]:
        detail = "; ".join(broken[:MAX_FINDINGS]) + ("; …" if len(broken) > MAX_FINDINGS else "")
        lines.append(escape(f"- {one_line(text)} — {one_line(detail)}", quote=False))
    lines.append("</memory_reminder>")
    return "\n".join(lines)
