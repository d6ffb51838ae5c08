"""What a note written without frontmatter is: one rule for every way such text arrives.

The memory tool's ``create``, MCP's ``remember`` without a type, extraction's plain facts and
a Markdown file dropped into the store by hand all come as bare text. Its type comes from its
words (the person's preference, a pointer, else a fact about the project) and its description
from its first line of prose, without Markdown marks.
This module does NOT read or write files: the store and the hosts do.
"""

from __future__ import annotations

import re

from .memory import MAX_DESCRIPTION_CHARS, Memory

_PREFERENCE = re.compile(
    r"(?i)\b(?:prefers?|likes?|wants?|always|never|don'?t|from now on)\b"
    r"|喜欢|偏好|希望|不要|好み|してほしい"
)
_MARKS = re.compile(r"^\s*(?:[#>]+\s*|[-*+]\s+)*")  # headings, quotes, list bullets
_CLOSING = re.compile(r"\s+#+\s*$")  # a heading's closing hashes ("## Title ##")


def sounds_like_preference(text: str) -> bool:
    """Whether a sentence reads as the person's preference or correction ("prefers", "never",
    "from now on", 喜欢…)."""
    return _PREFERENCE.search(text) is not None


def guess_type(text: str, types: tuple[str, ...]) -> str:
    """The type for text that came without one: the person's preference, a pointer (a
    link), else a fact about the project; always one of ``types``."""
    for kind, fits in (
        ("user_preference", sounds_like_preference(text)),
        ("reference", re.search(r"https?://", text) is not None),
        ("project_fact", True),
        ("reference", True),
    ):
        if fits and kind in types:
            return kind
    return types[0]


def first_line(text: str) -> str:
    """A note's first line of prose, without Markdown marks; code only when there is nothing
    else (a description reads better as "Always add type hints" than as a code fence)."""
    prose: list[str] = []
    code: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        bare = _CLOSING.sub("", _MARKS.sub("", line)).strip()
        if bare:
            (code if fenced else prose).append(bare)
            if prose:
                break
    return (prose or code or [""])[0]


def from_text(name: str, text: str, types: tuple[str, ...], kind: str | None = None) -> Memory:
    """The memory a bare note describes (``kind``: its type, if the caller knows it)."""
    text = text.lstrip("\ufeff")
    description = (first_line(text) or name)[:MAX_DESCRIPTION_CHARS]
    return Memory(name, kind or guess_type(text, types), description, text.strip("\n"))
