"""One rule for bare notes: a type from the words, a description from the first line."""

from __future__ import annotations

import pytest

from memdir.config import DEFAULT_TYPES
from memdir.notes import first_line, from_text, guess_type


@pytest.mark.parametrize(
    "text, kind",
    [
        ("I prefer tabs over spaces", "user_preference"),
        ("从现在开始请用中文回复", "project_fact"),
        ("用户喜欢简体中文", "user_preference"),
        ("Docs are at https://example.com/docs", "reference"),
        ("The team runs Postgres 16 on staging.", "project_fact"),
    ],
)
def test_a_type_from_the_words(text: str, kind: str) -> None:
    """A note without frontmatter gets its type from its words."""
    assert guess_type(text, DEFAULT_TYPES) == kind


def test_a_type_is_always_one_of_the_store_s() -> None:
    """A type is always one of the store's."""
    assert guess_type("I prefer tabs", ("note", "link")) == "note"
    assert guess_type("see https://x.y", ("note", "reference")) == "reference"


def test_the_description_is_the_first_line_of_prose() -> None:
    """A note's description is its first line of prose, not a heading or markup."""
    assert first_line("```sh\nmake\n```\n## Deploys ##\nOn Fridays") == "Deploys"
    mem = from_text("deploys", "\ufeff\n# Deploys\nOn Fridays\n", DEFAULT_TYPES)
    assert (mem.name, mem.description, mem.body) == ("deploys", "Deploys", "# Deploys\nOn Fridays")
