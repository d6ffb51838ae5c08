"""Getting JSON out of mangled model replies (property-based)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir.providers.jsonreply import extract_json

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.text(max_size=20))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
objects = st.dictionaries(st.text(min_size=1, max_size=8), values, min_size=1, max_size=4)
prose = st.text(st.characters(blacklist_characters="{}[]`\"'\\"), max_size=40)


def add_trailing_commas(text: str) -> str:
    return text.replace("}", ",}").replace("]", ",]").replace("{,}", "{}").replace("[,]", "[]")


@settings(max_examples=150)
@given(
    obj=objects,
    before=prose,
    after=prose,
    fence=st.booleans(),
    commas=st.booleans(),
    indent=st.sampled_from([None, 2]),
)
def test_mangled_object_is_recovered(
    obj: dict[str, Any], before: str, after: str, fence: bool, commas: bool, indent: int | None
) -> None:
    """Prose around it, code fences, indentation and trailing commas do not hide the object."""
    text = json.dumps(obj, indent=indent, ensure_ascii=False)
    if commas:
        text = add_trailing_commas(text)
    if fence:
        text = f"```json\n{text}\n```"
    assert extract_json(f"{before}\n{text}\n{after}") == obj


@given(items=st.lists(st.text(min_size=1, max_size=10), max_size=5), before=prose)
def test_bare_list_is_returned(items: list[str], before: str) -> None:
    """A list where an object was asked comes back as a list (callers may wrap it)."""
    assert extract_json(before + "\n" + json.dumps(items)) == items


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{'selected': ['a', 'b']}", {"selected": ["a", "b"]}),
        ('Sure! {"selected": ["x"]} Hope that helps.', {"selected": ["x"]}),
        ('{"a": "contains } brace"}', {"a": "contains } brace"}),
        ('{"memories": [], }', {"memories": []}),
        ("{'ok': true, 'v': null}", {"ok": True, "v": None}),
    ],
)
def test_common_slips(text: str, expected: Any) -> None:
    """Single quotes, braces inside strings, prose, trailing commas, JS literals."""
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "no json at all", "{unclosed: ", "```\n```"])
def test_nothing_usable_raises_value_error(text: str) -> None:
    """Without JSON the caller gets a ValueError it can hand back to the model."""
    with pytest.raises(ValueError):
        extract_json(text)


def test_reply_cut_by_the_token_limit_keeps_its_whole_items() -> None:
    """A reply truncated mid-item is closed after its last complete item."""
    assert extract_json('{"facts": ["one", "two", "thr') == {"facts": ["one", "two"]}
    cut = '{"memories": [{"name": "x", "body": "y"}, {"name": "z", "bo'
    assert extract_json(cut) == {"memories": [{"name": "x", "body": "y"}]}
