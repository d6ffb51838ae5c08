"""Getting JSON out of model replies: fences, prose around it, trailing commas, quotes.

It only parses; shape checks belong to the caller's validator. Raises ValueError (with a
message a model can act on) when nothing usable is found.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON|javascript|js)?\s*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _candidates(text: str) -> list[str]:
    """Substrings that may hold the JSON value, most likely first."""
    out = [m.group(1) for m in _FENCE.finditer(text)]
    out.append(text)
    first = min((i for i in (text.find("{"), text.find("[")) if i != -1), default=-1)
    if first != -1 and _balanced_end(text, first) is None:
        closed = _close_truncated(text[first:])
        if closed:
            out.append(closed)  # a reply cut off by the token limit: keep its whole items
    for opener in "{[":
        start = text.find(opener)
        while start != -1:
            end = _balanced_end(text, start)
            if end is not None:
                out.append(text[start : end + 1])
                break
            start = text.find(opener, start + 1)
    return out


def _close_truncated(text: str) -> str | None:
    """``text`` cut back to its last complete item and closed, or None."""
    stack: list[str] = []
    in_str = False
    escape = False
    cut: tuple[int, list[str]] | None = None
    for i, ch in enumerate(text):
        if in_str:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
            if stack and (cut is None or len(stack) <= len(cut[1])):
                cut = (i + 1, list(stack))
        elif ch == "," and stack and (cut is None or len(stack) <= len(cut[1])):
            cut = (i, list(stack))  # the latest cut at the shallowest level: whole items only
    if cut is None:
        return None
    end, open_ = cut
    return text[:end] + "".join(reversed(open_))


def _balanced_end(text: str, start: int) -> int | None:
    """Index of the bracket closing the one at ``start``, honouring strings; None if open."""
    depth = 0
    in_str: str | None = None
    escape = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == in_str:
                in_str = None
        elif ch in "\"'":
            in_str = ch
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i
    return None


def _loads_lenient(s: str) -> Any:
    s = s.strip()
    fixed = _TRAILING_COMMA.sub(r"\1", s)
    for attempt in (s, fixed):
        try:
            return json.loads(attempt)
        except (ValueError, RecursionError):
            continue
    # Python-style literals (single quotes, True/None) are a common small-model slip.
    pythonish = re.sub(
        r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", fixed))
    )
    try:
        value = ast.literal_eval(pythonish)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise ValueError("not valid JSON") from None
    if isinstance(value, (dict, list)):
        return value
    raise ValueError("not a JSON object or list")


MAX_DEPTH = 64  # memdir's replies nest three or four levels; deeper is hostile or broken


def _too_deep(text: str) -> bool:
    """Whether brackets nest deeper than MAX_DEPTH anywhere (strings are not told apart: a
    bracket-heavy string is as suspect as a deep value)."""
    depth = 0
    for ch in text:
        if ch in "{[":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif ch in "}]":
            depth = max(0, depth - 1)
    return False


def extract_json(text: str) -> Any:
    """The first JSON object or list found in ``text``; raise ValueError if there is none."""
    if not text or not text.strip():
        raise ValueError("the reply was empty")
    if _too_deep(text):
        raise ValueError(f"the JSON nests deeper than {MAX_DEPTH} levels")
    for candidate in _candidates(text):
        if not candidate.strip() or candidate.strip()[0] not in "{[":
            continue
        try:
            return _loads_lenient(candidate)
        except ValueError:
            continue
    raise ValueError("no JSON object found in the reply")
