"""Coding conventions: what a rule about how code is written governs (its slot) and the value
it sets, read from its words by rules memdir owns, never by a model.

A slot is the kind of code object and the aspect of it a rule governs: "function name prefix",
"class name case", "method decorator @retry", "import mailbox", "function docstrings",
"package manager". Two conventions are the same rule only when they govern the same slot; a
different slot is a new rule however many words the two share ("always import the 'mailbox'
module" and "always import the 'secrets' module" are two rules), and the same slot with a new
value is an update that replaces exactly the rule it names ("start function names with
'fn_'" replaces "start function names with 'x_'", never "use docstrings in functions").
A convention also says what code breaks it (``breaks``), for the reminder before an edit.
This module does NOT read or write stores: extraction (``learn.extract``) lands conventions
and the tool hook (``integrations.toolcheck``) checks code against them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# the kinds of code object a rule names (first match wins: "function argument" is an argument)
_SUBJECTS = (
    ("argument", r"(?:function |method )?(?:argument|parameter|param|arg)s?"),
    ("attribute", r"(?:class |instance )?(?:attributes?|fields?)"),
    ("method", r"(?:class )?methods?"),
    ("function", r"functions?"),
    ("class", r"class(?:es)?"),
    ("constant", r"constants?"),
    ("variable", r"(?:local )?variables?"),
    ("test", r"tests?(?: functions?| files?)?"),
    ("file", r"(?:source )?files?|modules?"),
)
_SUBJECT = "|".join(f"(?:{pattern})" for _, pattern in _SUBJECTS)
_Q = r"""['"`‘’“”]"""  # a quote mark around a value
_VALUE = rf"{_Q}(?P<value>[^'\"`‘’“”\s]{{1,40}}){_Q}"  # a quoted value: 'x_', "@retry"
_NAMES = rf"(?P<subject>{_SUBJECT})(?:'s)?\s+names?"

_ALL = r"(?:all\s+|every\s+|each\s+|your\s+|the\s+|our\s+|its\s+|their\s+)*"
_SHOULD = r"(?:(?:should|must|need to|have to|always|to|will)\s+)*"
# naming: "start function names with 'x_'", "function names should begin with 'x_'"
_NAMING = (
    ("name prefix", rf"\b(?:start|begin|prefix)\w*\s+{_ALL}{_NAMES}\s+with\s+{_VALUE}"),
    ("name prefix", rf"{_NAMES}\s+{_SHOULD}(?:start|begin)s?\s+with\s+{_VALUE}"),
    ("name prefix", rf"\bprefix\s+{_VALUE}\s+(?:to|on|for)\s+{_ALL}{_NAMES}"),
    ("name suffix", rf"\b(?:end|finish|suffix)\w*\s+{_ALL}{_NAMES}\s+with\s+{_VALUE}"),
    ("name suffix", rf"{_NAMES}\s+{_SHOULD}ends?\s+with\s+{_VALUE}"),
    (
        "name includes",
        rf"\b(?:include|contain|put|add|use)\w*\s+(?:the\s+)?(?:string\s+|substring\s+)?"
        rf"{_VALUE}\s+(?:in|into|within)\s+{_ALL}{_NAMES}",
    ),
)
_NAMING_RES = tuple((aspect, re.compile(p, re.IGNORECASE)) for aspect, p in _NAMING)
_DIGIT = re.compile(
    rf"\b(?:include|contain|put|add|use|end)\w*\s+(?:\w+\s+){{0,2}}(?:digits?|numbers?|numerals?)"
    rf"\s+(?:in|into|within|at the end of)\s+{_ALL}{_NAMES}",
    re.IGNORECASE,
)
_CASES = {
    "camelcase": "camelCase",
    "camel case": "camelCase",
    "pascalcase": "PascalCase",
    "pascal case": "PascalCase",
    "snake_case": "snake_case",
    "snake case": "snake_case",
    "kebab-case": "kebab-case",
    "kebab case": "kebab-case",
    "screaming_snake_case": "UPPER_CASE",
    "upper_case": "UPPER_CASE",
    "all uppercase": "UPPERCASE",
    "all upper case": "UPPERCASE",
    "uppercase": "UPPERCASE",
    "upper case": "UPPERCASE",
    "all lowercase": "lowercase",
    "lowercase": "lowercase",
    "lower case": "lowercase",
}
_CASE_WORDS = "|".join(sorted((re.escape(k) for k in _CASES), key=len, reverse=True))
_CASE = re.compile(
    rf"\b(?P<case>{_CASE_WORDS})\s+(?:for|in|on)\s+{_ALL}{_NAMES}"
    rf"|(?P<subject2>{_SUBJECT})(?:'s)?\s+names?\s+"
    rf"(?:should|must|are|be|in|use|always|written in|to be)\s+(?:\w+\s+){{0,2}}"
    rf"(?P<case2>{_CASE_WORDS})\b",
    re.IGNORECASE,
)
# "add the '@retry' decorator (from 'pedantic') to all methods", "decorate classes with @x"
_DECORATOR = re.compile(
    rf"{_Q}?@?(?P<deco>[A-Za-z_][\w.]{{0,60}}){_Q}?\s+decorator\b(?:[^.;]{{0,60}}?)\b(?:to|on|for)\s+"
    rf"(?:all\s+|every\s+|each\s+|your\s+|the\s+|our\s+)*(?P<subject>{_SUBJECT})"
    rf"|\bdecorate\s+(?:all\s+|every\s+|each\s+|your\s+|the\s+|our\s+)*(?P<subject2>{_SUBJECT})"
    rf"\s+with\s+{_Q}?@(?P<deco2>[A-Za-z_][\w.]{{0,60}}){_Q}?",
    re.IGNORECASE,
)
_IMPORT = re.compile(
    rf"\bimport\s+(?:the\s+)?{_Q}?(?P<module>[A-Za-z_][\w.]{{0,60}}){_Q}?\s+(?:module|package|library)\b"
    rf"|\bimport\s+{_Q}(?P<module2>[A-Za-z_][\w.]{{0,60}}){_Q}",
    re.IGNORECASE,
)
_ELEMENTS = {
    "docstring": "docstrings",
    "annotation": "annotations",
    "type annotation": "annotations",
    "type hint": "annotations",
    "try statement": "try statements",
    "try block": "try statements",
    "try/except": "try statements",
    "try-except": "try statements",
    "assert statement": "assert statements",
    "assertion": "assert statements",
    "comment": "comments",
    "logging": "logging",
    "log statement": "logging",
}
_ELEMENT_WORDS = "|".join(
    sorted((re.escape(k) + ("s?" if k[-1].isalpha() else "") for k in _ELEMENTS), key=len)[::-1]
)
_ELEMENT = re.compile(
    rf"(?:\b(?:add|write|use|include|have)\s+)?\b(?P<element>{_ELEMENT_WORDS})\b(?:\s+(?:statements?|blocks?))?\s+"
    rf"(?:in|for|to|on|inside)\s+(?:all\s+|every\s+|each\s+|your\s+|the\s+|our\s+)*"
    rf"(?P<subject>{_SUBJECT}|code)\b"
    rf"|\b(?:add|write|use|include)\s+(?P<element2>{_ELEMENT_WORDS})\b",
    re.IGNORECASE,
)
# tools: the slot is what the tool is for; the value is the tool
TOOLS = {
    "package manager": ("npm", "pnpm", "yarn", "bun", "pip", "pipenv", "poetry", "uv", "conda"),
    "test runner": ("pytest", "unittest", "nose", "jest", "vitest", "mocha"),
    "formatter": ("black", "prettier", "yapf", "autopep8", "gofmt"),
    "linter": ("ruff", "flake8", "pylint", "eslint", "a linter"),
    "type checker": ("mypy", "pyright", "pytype"),
    "debugger": ("pdb", "a debugger"),
    "profiler": ("a profiler", "cprofile"),
}
_TOOL_OF = {tool: kind for kind, tools in TOOLS.items() for tool in tools}
_TOOL = re.compile(
    r"\b(?:use|run|with|via|through|using)\s+(?P<tool>"
    + "|".join(re.escape(t) for t in sorted(_TOOL_OF, key=len, reverse=True))
    + r")\b",
    re.IGNORECASE,
)
_INDENT = re.compile(
    r"\bindent\w*\b[^.;]{0,30}?\b(?:with\s+)?(?P<n>\d+|two|four|eight)[\s-]+spaces?\b"
    r"|\b(?P<m>\d+|two|four|eight)[\s-]+spaces?\s+(?:for\s+)?indent\w*"
    r"|\bindent\w*\b[^.;]{0,30}?\bwith\s+(?P<tabs>tabs)\b|\b(?P<tabs2>tabs)\s+for\s+indent\w*",
    re.IGNORECASE,
)
_LINE_LENGTH = re.compile(
    r"\b(?:lines?|line length)\b[^.;]{0,30}?\b(?P<n>\d{2,3})\s*(?:characters|chars|columns|cols)\b",
    re.IGNORECASE,
)
_NEVER = re.compile(
    r"\b(?:never|don'?t|do not|avoid|no longer|stop|shouldn'?t|should not|must not|mustn'?t|"
    r"without)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Convention:
    """One rule about how code is written: the kind of object it governs (``subject``:
    function, method, class, variable, attribute, argument, file, test, code), the aspect
    (``aspect``: "name prefix", "decorator @retry", "docstrings"…) and the value it sets (a
    prefix, a case style, a tool, or "always"/"never" for what must or must not be there)."""

    subject: str
    aspect: str
    value: str

    @property
    def slot(self) -> str:
        """What the rule governs, as words: "function name prefix"."""
        return f"{self.subject} {self.aspect}"

    @property
    def name(self) -> str:
        """A memory name for the rule, made from its slot: ``function-name-prefix``."""
        return re.sub(r"[^a-z0-9]+", "-", self.slot.lower()).strip("-")

    def breaks(self, code: str) -> list[str]:
        """What in ``code`` (Python source, or any text for a tool's command) breaks this
        rule, one line each (empty: nothing does, or nothing here can tell)."""
        from .breaks import broken

        return broken(self, code)


def _subject(word: str) -> str:
    word = word.lower()
    for kind, pattern in _SUBJECTS:
        if re.fullmatch(pattern, word):
            return kind
    return "code"


def _never(text: str, start: int) -> bool:
    """Whether the clause before ``start`` says not to ("never", "don't", "avoid")."""
    clause = re.split(r"[.;:!?]|\bbut\b|\band\b", text[:start])[-1]
    return bool(_NEVER.search(clause))


def _polarity(text: str, m: re.Match[str]) -> str:
    return "never" if _never(text, m.start()) else "always"


def _tool(text: str, m: re.Match[str]) -> Convention | None:
    tool = m.group("tool").lower()
    negative = _never(text, m.start())
    if tool.startswith("a "):  # "use a linter": whether one is used at all
        return Convention("tooling", _TOOL_OF[tool], "never" if negative else "always")
    # "never use npm" alone names no tool to use instead
    return None if negative else Convention("tooling", _TOOL_OF[tool], tool)


def _indent(text: str, m: re.Match[str]) -> Convention:
    spaces = f"{_number(m.group('n') or m.group('m') or '')} spaces"
    return Convention("code", "indentation", "tabs" if m["tabs"] or m["tabs2"] else spaces)


_Read = Callable[[str, re.Match[str]], "Convention | None"]
_READERS: tuple[tuple[re.Pattern[str], _Read], ...] = (
    *(
        (pattern, lambda t, m, a=aspect: Convention(_subject(m["subject"]), a, m["value"]))
        for aspect, pattern in _NAMING_RES
    ),
    (_DIGIT, lambda t, m: Convention(_subject(m["subject"]), "name digit", _polarity(t, m))),
    (
        _CASE,
        lambda t, m: Convention(
            _subject(m["subject"] or m["subject2"]),
            "name case",
            _CASES[(m["case"] or m["case2"]).lower()],
        ),
    ),
    (
        _DECORATOR,
        lambda t, m: Convention(
            _subject(m["subject"] or m["subject2"]),
            f"decorator @{(m['deco'] or m['deco2']).lstrip('@')}",
            _polarity(t, m),
        ),
    ),
    (
        _IMPORT,
        lambda t, m: Convention("code", f"import {m['module'] or m['module2']}", _polarity(t, m)),
    ),
    (
        _ELEMENT,
        lambda t, m: Convention(
            _subject(m["subject"]) if m["subject"] else "code",
            _ELEMENTS[_singular(m["element"] or m["element2"])],
            _polarity(t, m),
        ),
    ),
    (_TOOL, _tool),
    (_INDENT, lambda t, m: _indent(t, m)),
    (_LINE_LENGTH, lambda t, m: Convention("code", "line length", f"{m['n']} characters")),
)


MAX_RULE_CHARS = 2000  # a rule is read in its first this many characters


def read(text: str) -> list[Convention]:
    """The conventions a text states (in its first ``MAX_RULE_CHARS``), each slot once, in
    the order they are stated."""
    text = text[:MAX_RULE_CHARS]
    found: dict[str, tuple[int, Convention]] = {}
    for pattern, make in _READERS:
        for m in pattern.finditer(text):
            conv = make(text, m)
            if conv is not None and conv.slot not in found:
                found[conv.slot] = (m.start(), conv)
    if not found:
        practice = _practice(text)
        return [practice] if practice is not None else []
    return [conv for _, conv in sorted(found.values(), key=lambda pair: pair[0])]


_USE_FOR = re.compile(
    r"^(?:please\s+)?use\s+(?P<tool>.{1,40}?)\s+(?:for|as)\s+(?P<purpose>.{3,60})$",
    re.IGNORECASE,
)
_POLARITY = re.compile(
    r"^(?:please\s+)?(?P<word>always|never|don'?t|do not|avoid)\s+(?P<rest>.{3,100})$",
    re.IGNORECASE,
)
_IMPERATIVE = re.compile(
    r"^(?P<rest>(?:use|run|commit|push|work|write|set|keep|put|call|deploy|name|take|store|"
    r"avoid|prefer|add|include|pin|target|build|test|format|lint|merge|rebase|review|open)\b.{3,100})$",
    re.IGNORECASE,
)
_AMOUNT = re.compile(
    r"\b(?:\d[\d.,]*|one|two|three|four|five|six|seven|eight|nine|ten|once|twice|thrice|"
    r"half|all|a single|single|several)\b(?:\s+(?:times|or more|or less|of the))?",
    re.IGNORECASE,
)
_FILLER = re.compile(r"\b(?:the|a|an|our|your|their|its|main|preferred)\s+", re.IGNORECASE)


def _practice(text: str) -> Convention | None:
    """A one-sentence rule with no code slot: "use X for/as Y" governs Y; "always X" and
    "never X" govern X; an imperative governs itself with its amounts set apart ("take a
    break every 80 minutes" and "… every 50 minutes" are one rule)."""
    sentence = text.strip().rstrip(".!").strip()
    if "\n" in sentence or len(sentence.split()) > 20 or re.search(r"[.;!?]\s", sentence):
        return None
    if (m := _USE_FOR.match(sentence)) is not None:
        purpose = _FILLER.sub("", m.group("purpose").lower()).strip()
        return Convention("practice", f"what to use for {purpose}", m.group("tool").strip())
    if (m := _POLARITY.match(sentence)) is not None:
        rest, value = m.group("rest"), "never" if m.group("word").lower() != "always" else "always"
    elif (m := _IMPERATIVE.match(sentence)) is not None:
        rest, value = m.group("rest"), "always"
    else:
        return None
    amounts = [a.group(0).lower() for a in _AMOUNT.finditer(rest)]
    key = _FILLER.sub("", _AMOUNT.sub("N", rest.lower())).strip()
    if amounts:
        value = f"{value} {' '.join(amounts)}" if value == "never" else " ".join(amounts)
    return Convention("practice", key, value)


_REPORT = re.compile(
    r"\b(?:discuss\w*|talked about|chatted about|mentioned|brought up|conversation about|"
    r"went over|spoke about|shared (?:thoughts|news))\b",
    re.IGNORECASE,
)
_DIRECTIVE = re.compile(
    r"\b(?:always|never|don'?t|do not|must|should|prefer\w*|wants?|likes?|avoid|use|make sure|"
    r"instead|from now on|please|remember to)\b",
    re.IGNORECASE,
)


def reported(text: str) -> bool:
    """Whether ``text`` reports what was talked about ("The user discussed: flexible work
    hours") without asking anything of anyone: a note, never a standing rule."""
    return bool(_REPORT.search(text)) and not _DIRECTIVE.search(text)


def one(text: str) -> Convention | None:
    """The one convention ``text`` states, or None (none, or several)."""
    found = read(text)
    return found[0] if len(found) == 1 else None


def stated(description: str, body: str) -> Convention | None:
    """The one convention a memory states: its description's, else its body's."""
    return one(description) or one(body)


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+|;\s*")


def split(text: str) -> list[str]:
    """``text`` as one piece per convention it states: its sentences that state one each
    (a sentence that states several is kept whole for each). A text that states none or one
    comes back whole."""
    if len(read(text)) <= 1:
        return [text]
    pieces: list[str] = []
    for sentence in (s.strip() for s in _SENTENCE.split(text)):
        for _ in read(sentence):
            pieces.append(sentence)
    return pieces or [text]


def _singular(word: str) -> str:
    word = word.lower()
    return word if word in _ELEMENTS else word[:-1]


def _number(word: str) -> str:
    return {"two": "2", "four": "4", "eight": "8"}.get(word.lower(), word)


# code elements a rule about names looks at, by the subject it names
