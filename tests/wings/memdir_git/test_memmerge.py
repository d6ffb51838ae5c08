"""The three-way merge of one memory file (what git's merge driver runs)."""

from __future__ import annotations

from memdir import memory as memfmt
from memdir.memory import Memory
from memdir_git.merge import conflict_of, merge


def text(body: str = "Tabs, width 4", **kw: object) -> str:
    fields: dict[str, object] = {
        "name": "tabs",
        "type": "user_preference",
        "description": "Use tabs",
        "body": body,
        "created": "2026-01-01T00:00:00Z",
        "updated": "2026-01-01T00:00:00Z",
    }
    fields.update(kw)
    return memfmt.dumps(Memory(**fields))  # type: ignore[arg-type]


BASE = text()


def test_one_side_changed_takes_it():
    """A memory changed on one side only merges to that side's text."""
    ours = text("Tabs, width 8", updated="2026-02-01T00:00:00Z")
    assert merge(BASE, ours, BASE).text == ours
    assert merge(BASE, BASE, ours).text == ours


def test_different_fields_combine_and_updated_takes_the_later_time():
    """Different fields combine and updated takes the later time."""
    ours = text(type="feedback", updated="2026-02-01T00:00:00Z")
    theirs = text("Tabs, width 8", updated="2026-03-01T00:00:00Z", extra={"pinned": True})
    out = merge(BASE, ours, theirs)
    mem = memfmt.loads(out.text)
    assert (mem.type, mem.body, mem.updated) == (
        "feedback",
        "Tabs, width 8",
        "2026-03-01T00:00:00Z",
    )
    assert mem.pinned and out.fields == () and conflict_of(mem) is None


def test_description_and_body_change_together():
    # one side says the port moved in the description, the other edits the body: a conflict,
    # never a description that contradicts its body
    """Description and body change together."""
    ours = text("port 8000 --reload", updated="2026-03-01T00:00:00Z")
    theirs = text(description="Port 8080", updated="2026-02-01T00:00:00Z")
    out = merge(BASE, ours, theirs)
    mem = memfmt.loads(out.text)
    assert (mem.description, mem.body) == ("Use tabs", "port 8000 --reload")
    assert out.fields and conflict_of(mem) is not None


def test_same_field_changed_differently_keeps_the_later_and_marks_the_memory():
    """Same field changed differently keeps the later and marks the memory."""
    ours = text("Tabs, width 2", updated="2026-02-01T00:00:00Z")
    theirs = text("Tabs, width 8", updated="2026-03-01T00:00:00Z")
    out = merge(BASE, ours, theirs, ref=lambda t: "blob-of-" + memfmt.loads(t).body[-1])
    mem = memfmt.loads(out.text)
    assert mem.body == "Tabs, width 8"
    mark = conflict_of(mem)
    assert mark is not None and mark["other"] == "blob-of-2" and mark["fields"] == ["body"]
    assert "<<<<<<<" not in out.text
    # whichever side merges, the same text wins
    again = merge(BASE, theirs, ours, ref=lambda t: "blob-of-" + memfmt.loads(t).body[-1])
    assert memfmt.loads(again.text).body == "Tabs, width 8"
    assert conflict_of(memfmt.loads(again.text))["other"] == "blob-of-2"  # type: ignore[index]


def test_equal_times_are_decided_by_the_texts_the_same_way_on_both_sides():
    """Equal times are decided by the texts the same way on both sides."""
    ours, theirs = text("A"), text("B")
    assert merge(BASE, ours, theirs).text == merge(BASE, theirs, ours).text


def test_both_added_the_same_name():
    """Two sides that added the same name merge into one memory."""
    ours = text("from laptop", updated="2026-02-01T00:00:00Z")
    theirs = text("from dev box", updated="2026-02-02T00:00:00Z")
    out = merge(None, ours, theirs)
    assert memfmt.loads(out.text).body == "from dev box" and out.fields == ("body",)


def test_a_side_that_is_not_a_memory_loses_to_one_that_is():
    """A side that is not a memory loses to one that is."""
    broken = "not a memory file at all\n"
    theirs = text("Tabs, width 8", updated="2026-02-01T00:00:00Z")
    out = merge(BASE, broken, theirs)
    assert out.text == theirs and out.fields == ("file",)


def test_a_resolved_mark_stays_resolved_when_the_other_side_did_not_touch_it():
    """A resolved mark stays resolved when the other side did not touch it."""
    marked = text(extra={"conflict": {"other": "abc", "fields": ["body"], "since": "x"}})
    cleared = text()
    assert conflict_of(memfmt.loads(merge(marked, cleared, marked).text)) is None
