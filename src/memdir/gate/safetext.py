"""Rendering untrusted text (names, types, descriptions from hand-written files or a model) so
that it cannot change the structure around it: a line of ``MEMORY.md``, a prompt, a terminal.

Every field that reaches one of those goes through a function here. ``one_line`` is the base:
control characters (ANSI escapes, carriage returns), line and paragraph separators, and
invisible format characters (bidirectional overrides, zero-width joiners) become spaces or
disappear, so one field stays one line and reads as it is stored.
This module does NOT decide what to show; callers do.
"""

from __future__ import annotations

import re
import unicodedata
from html import escape

# Chinese, Japanese and Korean scripts, as one regex character class (search indexes them as
# bigrams; extraction and secret detection tell CJK text apart with it).
CJK = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
)  # hangul
CJK_CHAR = re.compile(f"[{CJK}]")

_MD_SPECIAL = re.compile(r"([\\`\[\]<>])")


def _clean_char(ch: str) -> str:
    cat = unicodedata.category(ch)
    if cat in ("Cc", "Zl", "Zp") or ch in "\t\n\r\x0b\x0c":
        return " "
    if cat in ("Cf", "Co", "Cs", "Cn"):
        return ""
    return ch


def one_line(text: str) -> str:
    """``text`` as one printable line: controls and separators become spaces, invisible format
    characters are dropped, runs of white space collapse."""
    if text.isprintable() and "  " not in text and text == text.strip():
        return text  # the common case, cheaply
    return " ".join("".join(_clean_char(ch) for ch in text).split())


def for_markdown(text: str) -> str:
    """One line of Markdown that renders as the literal text (no links, images, HTML, headings)."""
    return _MD_SPECIAL.sub(r"\\\1", one_line(text))


def for_prompt(text: str) -> str:
    """One line inside an XML-tagged prompt section: it cannot open or close a tag."""
    return escape(one_line(text), quote=False)


def for_body(text: str) -> str:
    """Several lines inside an XML-tagged prompt section: line breaks stay, tags are escaped,
    other control characters go."""
    return escape(visible(text), quote=False)


def visible(text: str) -> str:
    """Several lines as they read: line breaks and tabs stay; control characters and invisible
    ones (format characters such as Unicode tag characters, zero-width joiners, bidirectional
    overrides; unassigned and private-use code points; lone surrogates) go — a model is never
    handed text a person cannot see."""
    if text.isprintable():
        return text
    return "".join(
        ch if ch in "\n\t" or ch.isprintable() else _clean_char(ch)
        for ch in text.replace("\r\n", "\n")
    )


def for_terminal(text: str) -> str:
    """One line for a person's terminal: no escape sequences reach it."""
    return one_line(text)


def for_terminal_text(text: str) -> str:
    """Several lines for a terminal: line breaks and tabs stay, escape sequences and other
    control or invisible characters go."""
    return visible(text)


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal (East Asian wide characters take two)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def pad(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` terminal columns."""
    return text + " " * max(0, width - display_width(text))


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 memory``, ``2 memories``."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def lines_of(text: str, part: str) -> list[int]:
    """The line numbers where ``part`` starts in ``text``, as ``str.count`` counts them (no
    overlaps), in one pass however many there are."""
    lines, at, line, pos = [], text.find(part) if part else -1, 1, 0
    while at != -1:
        line += text.count("\n", pos, at)
        pos = at
        lines.append(line)
        at = text.find(part, at + len(part))
    return lines


# A line that would pass for the start of another speaker's turn in a "role: text" transcript.
_SPEAKER = re.compile(
    r"^(\s*)(user|assistant|system|human|ai|developer|tool)(\s*:)", re.IGNORECASE | re.MULTILINE
)


def speaker_turn(role: str, text: str) -> str:
    """One message of a transcript as ``role: text``, so that no line inside it can pass for
    another speaker's: its further lines are indented, and a line that starts like a speaker
    label has the label quoted (``"user":``). Only the speaker's own label stands at the start
    of a line."""
    quoted = _SPEAKER.sub(lambda m: f'{m.group(1)}"{m.group(2)}"{m.group(3)}', text)
    return f"{role}: " + quoted.replace("\n", "\n  ")
