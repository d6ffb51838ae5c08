"""Who may let the agent run a command or change a file: the user, asked each time, or rules.

``Gate`` decides each bash call and each file write: allowed by a rule (``allow`` in the
user's config.toml or a trusted project's, e.g. ``"bash:pytest*"``, ``"write:src/**"``),
allowed for the rest of the session
after the user said "always", or asked (``ask``). Without a way to ask (``memdir run``, a
pipe), what no rule allows is refused with a message the model passes on; ``--yes`` allows
everything except writes into ``.git``, which always need a rule or a yes of their own.
A ``bash:`` rule matches commands, not strings: a line is split at ``;``, ``&&``, ``||``,
``|``, ``&`` and newlines and every part must match a rule; a line with a substitution
(``$(…)``, backticks, ``<(…)``), a redirection, a subshell or a here-document is never allowed
by a rule, only by the user.
This module does NOT run anything: the tools ask it first.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

AskFn = Callable[[str, str], str]  # (kind, what) -> "once" | "always" | "deny"
PROTECTED = (".git/", ".git")  # hooks and config there run code later, unseen


_SEPARATORS = {";", "&&", "||", "|", "&", "\n", "|&", ";;"}
_UNSAFE = re.compile(r"\$\(|`|<\(|>\(")


def simple_commands(line: str) -> list[str] | None:
    """The simple commands a shell line runs, each as its words joined by one space; None
    when the line does more than run commands (substitutions, redirections, subshells,
    here-documents) or cannot be parsed, so that no rule can cover it."""
    if _UNSAFE.search(line):
        return None
    lexer = shlex.shlex(line.replace("\n", " \n "), posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:
        return None  # an unclosed quote
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEPARATORS:
            parts.append([])
        elif token and set(token) <= set("<>()&|;"):
            return None  # a redirection, a subshell or an operator we do not split on
        else:
            parts[-1].append(token)
    commands = [" ".join(p) for p in parts if p]
    return commands or None


def _protected(path: str) -> bool:
    return any(path == p.rstrip("/") or path.startswith(p) for p in PROTECTED)


@dataclass
class Gate:
    """The approval policy of one agent session."""

    rules: tuple[str, ...] = ()
    yes: bool = False
    ask: AskFn | None = None
    session: set[str] = field(default_factory=set)  # kinds the user allowed for the session

    def check(self, kind: str, what: str) -> str | None:
        """None if ``kind`` ("bash" or "write") on ``what`` may go ahead, else why not."""
        if self._ruled(kind, what):
            return None
        protected = kind == "write" and _protected(what)
        if not protected and (self.yes or kind in self.session):
            return None
        if self.ask is None:
            how = (
                "add a rule such as \"write:.git/hooks/*\" to 'allow' in config.toml"
                if protected
                else "run with --yes, or add a rule such as"
                f" \"{kind}:{what.split()[0] if what.split() else what}*\" to 'allow' in"
                " config.toml"
            )
            return f"refused: {kind} {what!r} needs the user's approval — {how}"
        answer = self.ask(kind, what)
        if answer == "always" and not protected:
            self.session.add(kind)
        if answer in ("once", "always"):
            return None
        return f"refused: the user declined {kind} {what!r}"

    def _ruled(self, kind: str, what: str) -> bool:
        """Whether the rules allow it: a write by its path; a command line only if every
        simple command in it matches a rule."""
        patterns = [r.partition(":")[2] for r in self.rules if r.partition(":")[0] == kind]
        if not patterns:
            return False
        if kind != "bash":
            return any(fnmatch.fnmatchcase(what, p) for p in patterns)
        commands = simple_commands(what)
        return commands is not None and all(
            any(fnmatch.fnmatchcase(cmd, p) for p in patterns) for cmd in commands
        )
