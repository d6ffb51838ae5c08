"""Who may let the agent run a command or change a file: the user, asked each time, or rules.

``Gate`` decides each bash call and each file write: allowed by a rule (``allow`` in
config.toml, e.g. ``"bash:pytest*"``, ``"write:src/**"``), allowed for the rest of the session
after the user said "always", or asked (``ask``). Without a way to ask (``memdir run``, a
pipe), what no rule allows is refused with a message the model passes on; ``--yes`` allows
everything except writes into ``.git``, which always need a rule or a yes of their own.
This module does NOT run anything: the tools ask it first.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, field

AskFn = Callable[[str, str], str]  # (kind, what) -> "once" | "always" | "deny"
PROTECTED = (".git/", ".git")  # hooks and config there run code later, unseen


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
        if any(r.partition(":")[0] == kind and fnmatch.fnmatchcase(what, r.partition(":")[2])
               for r in self.rules):
            return None
        protected = kind == "write" and _protected(what)
        if not protected and (self.yes or kind in self.session):
            return None
        if self.ask is None:
            how = ("add a rule such as \"write:.git/hooks/*\" to 'allow' in config.toml"
                   if protected else "run with --yes, or add a rule such as"
                   f" \"{kind}:{what.split()[0] if what.split() else what}*\" to 'allow' in"
                   " config.toml")
            return f"refused: {kind} {what!r} needs the user's approval — {how}"
        answer = self.ask(kind, what)
        if answer == "always" and not protected:
            self.session.add(kind)
        if answer in ("once", "always"):
            return None
        return f"refused: the user declined {kind} {what!r}"
