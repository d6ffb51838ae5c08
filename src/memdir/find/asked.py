"""What a question asks of memory search besides its words, and the hits weighed for it.

After ``ranking.rank_many`` has fused BM25 and cosines over a wider pool, one store's search
and ``Scopes``' search alike hand the hits to ``Asked.weigh``: what was said in the period the
question names counts more (``periods``). ``names`` are the names a question gives (recall's
relevance floor asks whether any memory mentions them). ``explain`` says what the question
set off, a line each, for ``--explain``.
This module does NOT rank anything itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import periods

if TYPE_CHECKING:
    from ..config import Config
    from ..entry import Hit


@dataclass(frozen=True)
class Asked:
    """One question to memory search: its text, the period it names, how many hits it
    wants."""

    query: str
    k: int
    config: Config
    period: periods.Period | None

    @classmethod
    def of(cls, query: str, k: int, config: Config) -> Asked:
        return cls(query, k, config, periods.named_period(query))

    @property
    def ranked(self) -> int:
        """How many candidates to ask the ranking for."""
        return max(self.k, periods.CANDIDATES if self.period is not None else 0)

    def weigh(self, hits: list[Hit]) -> list[Hit]:
        """The ``k`` best of the ranking's ``hits`` (best first) once weighed for the
        question."""
        if self.period is not None:
            hits = periods.in_period_first(hits, self.period, self.k)
        return hits[: self.k]


# Capitalised inside a sentence, yet not names: the months and days a period is made of
# (``periods`` weighs those)
_NOT_NAMES = frozenset(
    "january february march april may june july august september october november december"
    " monday tuesday wednesday thursday friday saturday sunday".split()
)
_NAME = re.compile(r"[\"'(\[]*([A-Z][a-z]{2,})(?:['’]s)?[^\w]*")


def names(query: str) -> list[str]:
    """The names a question gives — a person, a place, a product: a word inside a sentence
    that starts with a capital and goes on in small letters ("Gina", "Vivaldi", "Django"),
    not a month or a day. A word with capitals inside or in capitals alone ("GitHub",
    "UserService", "CLI") is an identifier, not a name."""
    out: list[str] = []
    for line in query.splitlines():
        words = [w for w in line.split() if any(c.isalnum() for c in w)]  # ("-", "*": marks)
        for i, word in enumerate(words):
            if i == 0 or words[i - 1].endswith((".", "?", "!", ":")):
                continue  # (a sentence's or a line's first word is capitalised whatever it is)
            m = _NAME.fullmatch(word)
            if m and m.group(1).lower() not in _NOT_NAMES and m.group(1) not in out:
                out.append(m.group(1))
    return out


def explain(query: str) -> list[str]:
    """What ``query`` asks that weighs its search, one line each (``--explain``)."""
    period = periods.named_period(query)
    if period is None:
        return []
    return [
        f"period asked about: {period.describe()} (what was said then, or up to"
        f" {periods.SLACK_DAYS} days after, counts ×{periods.WEIGHT:g})"
    ]
