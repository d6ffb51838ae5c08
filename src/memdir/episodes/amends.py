"""Whether a later turn amends a decision an earlier one made (``amended``): the user's
words say a decision changed ("from now on", "instead", "switch to") and share its subject.
This module does NOT change any turn (``Episodes.amend`` does)."""

from __future__ import annotations

import re

from ..find.search import tokenize

# what a user says when a decision changed
_AMENDS = re.compile(
    r"\b(?:from now on|instead(?: of)?|going forward|from here on|no longer|not anymore|"
    r"changed? (?:our|my) minds?|chang(?:e|ed|ing) (?:it|that|this) to|switch(?:ed|ing)? (?:it |"
    r"over )?to|replac(?:e|ed|ing)|scrap (?:that|this)|revers(?:e|ed|ing)|revert(?:ed|ing)?|"
    r"actually,|rather than|update:|amend(?:ed|ing)?|on second thought)\b",
    re.IGNORECASE,
)
# what a turn says when it decides something
_DECIDES = re.compile(
    r"\b(?:decided?|decision|settled on|settle on|agreed?|go with|going with|we(?:'ll| will) use|"
    r"let'?s use|use|always|never|must|should|policy|rule|standard|convention|pick(?:ed)?|"
    r"chose|choose|keep|set)\b",
    re.IGNORECASE,
)
_USER_LINE = re.compile(r"^user:\s?", re.IGNORECASE)
_GENERIC = frozenset(
    tokenize(
        "we our us you your i my it this that now from on instead going forward decided decision"
        " use using always never should must change changed mind actually let lets team project"
        " code rather than anymore longer replace replaced switch switched settle settled agree"
        " agreed keep set new old"
    )
)


def _users_words(text: str) -> str:
    """What the user said in a kept turn (its ``user:`` lines), else the whole turn."""
    lines = text.splitlines()
    users = [_USER_LINE.sub("", line) for line in lines if _USER_LINE.match(line)]
    return "\n".join(users) if users else text


def amending(text: str) -> str:
    """The sentences of the user's words in a kept turn that say a decision changed ('':
    none)."""
    sentences = re.split(r"(?<=[.!?])\s+|\n+", _users_words(text))
    return " ".join(s for s in sentences if _AMENDS.search(s))


def amended(earlier: str, later: str) -> bool:
    """Whether the later turn changes what the earlier one decided: the earlier decides
    something, and the two share the subject — at least three of the informative words of
    the later user's sentences that say what changed, and half of them."""
    if not _DECIDES.search(_users_words(earlier)):
        return False
    theirs = set(tokenize(amending(later))) - _GENERIC
    shared = theirs & set(tokenize(_users_words(earlier)))
    return len(shared) >= 3 and 2 * len(shared) >= len(theirs)
