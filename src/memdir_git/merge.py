"""Three-way merge of one memory file, field by field (what git's merge driver runs).

Changes to different fields combine; ``updated`` takes the later time and ``created`` the
earlier. The description and the body are one field here (the description says what the body
holds). When both sides changed the same field differently (the text, the type, a key a
person added) the merge never writes conflict markers: the side written later
becomes the current version and the memory is marked ``conflict:`` with the other side's
identity, so that people and recall see it until ``memdir resolve``. Which side wins depends
only on the two texts, so every clone that merges them gets the same file.
This module does NOT touch files or run git.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from memdir import memory as memfmt
from memdir.errors import InvalidMemory
from memdir.memory import CONFLICT_KEY, Memory

_MISSING: Any = object()


@dataclass(frozen=True)
class Merged:
    """The merged file text, and the fields both sides changed differently (the side that
    did not become current is named in the text's conflict mark: ``conflict_of``)."""

    text: str
    fields: tuple[str, ...] = ()  # the fields both sides changed differently


def _pick(base: Any, ours: Any, theirs: Any) -> tuple[Any, bool]:
    """The merged value of one field, and whether the two sides disagree."""
    if ours == theirs:
        return ours, False
    if base == ours:
        return theirs, False
    if base == theirs:
        return ours, False
    return _MISSING, True


def _later(ours: str, theirs: str, o: Memory | None, t: Memory | None) -> bool:
    """Whether ``theirs`` wins a disagreement: written later, else the larger text (so the
    choice is the same whichever side merges)."""
    ot = (o.updated or "") if o else ""
    tt = (t.updated or "") if t else ""
    if ot != tt:
        return tt > ot
    return memfmt.digest_of(theirs.encode()) > memfmt.digest_of(ours.encode())


def _parse(text: str | None) -> Memory | None:
    if text is None or not text.strip():
        return None
    try:
        return memfmt.loads(text)
    except InvalidMemory:
        return None


def merge(
    base: str | None,
    ours: str,
    theirs: str,
    *,
    ref: Callable[[str], str] = lambda text: memfmt.digest_of(text.encode())[:12],
    when: str | None = None,
) -> Merged:
    """Merge two versions of one memory file that share ``base`` (None: both added it).
    ``ref`` names the losing text in the ``conflict`` mark (git gives its blob id)."""
    if ours == theirs or theirs == base:
        return Merged(ours)
    if ours == base:
        return Merged(theirs)
    o, t, b = _parse(ours), _parse(theirs), _parse(base)
    theirs_wins = _later(ours, theirs, o, t)
    if o is None or t is None:  # a side that is not a memory file: whole-file choice
        if o is None and t is not None:
            theirs_wins = True
        elif t is None and o is not None:
            theirs_wins = False
        return Merged(theirs if theirs_wins else ours, ("file",))
    fields: dict[str, str] = {}
    clashes: list[str] = []
    for key in ("name", "type"):
        value, clash = _pick(getattr(b, key) if b else _MISSING, getattr(o, key), getattr(t, key))
        fields[key] = value
        if clash:
            clashes.append(key)
    # the description says what the body holds: the two change together or not at all
    text, text_clash = _pick(
        (b.description, b.body) if b else _MISSING,
        (o.description, o.body),
        (t.description, t.body),
    )
    if text_clash:
        clashes += [k for k in ("description", "body") if getattr(o, k) != getattr(t, k)]
    else:
        fields["description"], fields["body"] = text
    extra = _merge_extra(b.extra if b else {}, o.extra, t.extra, clashes)
    winner = t if theirs_wins else o
    if text_clash:  # the text of one side, whole
        fields["description"], fields["body"] = winner.description, winner.body
    for key in clashes:
        if key in ("name", "type", "description", "body"):
            fields[key] = getattr(winner, key)
    for key in [k for k in clashes if k not in fields]:
        value = winner.extra.get(key, _MISSING)
        if value is _MISSING:
            extra.pop(key, None)
        else:
            extra[key] = value
    loser_text = None
    if clashes:
        loser_text = ours if theirs_wins else theirs
        extra.pop(CONFLICT_KEY, None)
        extra[CONFLICT_KEY] = {
            "other": ref(loser_text),
            "fields": [k for k in clashes if k != CONFLICT_KEY],
            "since": when or memfmt.now(),
        }
    times = [x for x in (o.created, t.created) if x]
    updates = [x for x in (o.updated, t.updated) if x]
    merged = Memory(
        name=fields["name"],
        type=fields["type"],
        description=fields["description"],
        body=fields["body"],
        created=min(times) if times else None,
        updated=max(updates) if updates else None,
        extra=extra,
    )
    return Merged(memfmt.dumps(merged), tuple(clashes))


def _merge_extra(
    base: Mapping[str, Any], ours: Mapping[str, Any], theirs: Mapping[str, Any], clashes: list[str]
) -> dict[str, Any]:
    """The other frontmatter keys merged one by one, in the order the sides list them; keys
    both sides changed differently are added to ``clashes``."""
    out: dict[str, Any] = {}
    for key in list(dict.fromkeys([*ours, *theirs])):
        value, clash = _pick(
            base.get(key, _MISSING), ours.get(key, _MISSING), theirs.get(key, _MISSING)
        )
        if clash:
            if key == CONFLICT_KEY:  # two marks: the newer one is set again below if needed
                value = max(
                    (v for v in (ours.get(key), theirs.get(key)) if isinstance(v, dict)),
                    key=lambda v: str(v.get("since", "")),
                    default=ours.get(key),
                )
            else:
                clashes.append(key)
                continue
        if value is not _MISSING:
            out[key] = value
    return out


class ConflictMark(TypedDict, total=False):
    """The ``conflict`` key a merge gives a memory both sides changed."""

    other: str  # the git blob id of the side kept in history
    fields: list[str]  # what both sides changed differently
    since: str  # when the merge found it


def conflict_of(memory: Memory) -> ConflictMark | None:
    """The ``conflict`` mark of a memory, if it has one (as a person may have written it)."""
    mark = memory.extra.get(CONFLICT_KEY)
    if mark is None:
        return None
    if not isinstance(mark, dict):
        return {"other": str(mark)}
    out: ConflictMark = {"other": str(mark.get("other", ""))}
    if isinstance(mark.get("fields"), list):
        out["fields"] = [str(f) for f in mark["fields"]]
    if mark.get("since") is not None:
        out["since"] = str(mark["since"])
    return out
