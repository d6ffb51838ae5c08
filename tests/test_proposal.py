"""A model's proposed memory made safe: one rule for extraction and the agent's own tool."""

from __future__ import annotations

from pathlib import Path

from memdir import MemoryStore
from memdir.learn.proposal import coerce, name_for, without_echo
from memdir_agent.tools import Tools

TYPES = ("user_preference", "project_fact", "feedback", "reference")


def test_catalogue_formatting_and_labels_are_not_learned() -> None:
    """Catalogue formatting and labels are not learned."""
    assert (
        without_echo("user_preference (user_preference) [user]: User runs tests with pytest")
        == "User runs tests with pytest"
    )
    assert without_echo("- tabs (user_preference): Use tabs") == "Use tabs"
    assert without_echo("Project fact: the API listens on 8080") == "the API listens on 8080"
    assert without_echo("Understood: make test runs the suite") == "make test runs the suite"
    assert without_echo("Thanks, noted: pytest -q") == "pytest -q"
    # a name written as words before the type, as a model copied it from the catalogue
    assert (
        without_echo("Melanie taking-care-family (project_fact): Melanie took care of herself.")
        == "Melanie took care of herself."
    )
    assert without_echo("Use tabs: always") == "Use tabs: always"  # text, not a label
    assert without_echo("Mel's kids (two of them): Oliver and Ava") == (
        "Mel's kids (two of them): Oliver and Ava"
    )  # words in parentheses that are no type are text
    assert without_echo("OK") == "OK"  # nothing would be left


def test_type_names_are_not_memory_names() -> None:
    """Type names are not memory names."""
    taken: set[str] = set()
    assert (
        name_for("user_preference", "Runs tests with pytest", TYPES, taken) == "runs-tests-pytest"
    )
    bad = "user_preference-user_preference-user-user-runs"
    assert name_for(bad, "Runs tests with pytest", TYPES, taken) == "runs-tests-pytest"
    assert name_for("api-port", "The API port", TYPES, taken) == "api-port"
    echoed = "melanie-taking-care-family-project_fact"
    assert name_for(echoed, "Melanie (project_fact) took care", TYPES, taken) == (
        "melanie-took-care"
    )


def test_coerce_cleans_an_echoed_item(tmp_path: Path) -> None:
    """A model's item that echoes the prompt's formatting is cleaned."""
    store = MemoryStore(tmp_path / ".memory")
    item = {
        "name": "user_preference",
        "type": "preference",
        "description": "user_preference (user_preference) [user]: User runs tests with pytest",
        "body": "Project fact: User runs tests with pytest -q",
    }
    coerced = coerce(item, store, set())
    assert not isinstance(coerced, str)
    action, mem = coerced
    assert (action, mem.type) == ("create", "user_preference")
    assert mem.description == "User runs tests with pytest"
    assert mem.body == "User runs tests with pytest -q" and mem.name == "user-runs-tests-pytest"


def test_the_agents_tool_goes_through_the_same_guards(tmp_path: Path) -> None:
    """The agent's tool goes through the same guards."""
    store = MemoryStore(tmp_path / ".memory")
    tools = Tools(tmp_path, store)
    out = tools.run(
        "save_memory",
        {
            "name": "project_fact",
            "type": "project_fact",
            "description": "Project fact: the API listens on 8080",
            "body": "Project fact: the API listens on 8080 now, not 8000",
        },
    )
    assert not out.is_error
    [entry] = store.entries()
    assert entry.name not in TYPES and entry.description == "the API listens on 8080"
    assert store.get(entry.name).body == "the API listens on 8080 now, not 8000"
    empty = tools.run(
        "save_memory", {"name": "x", "type": "feedback", "description": "", "body": ""}
    )
    assert empty.is_error and "neither description nor body" in empty.text


def test_a_correction_makes_stale_the_memories_holding_the_value_it_replaced(
    tmp_path: Path,
) -> None:
    """ "We switched CI from Jenkins to GitHub Actions", learned in other words: the memories
    that hold the replaced value on that subject are stale; one holding the new value, one
    sharing the value on another subject, and anything said without a correction are not."""
    from memdir.config import Config
    from memdir.learn.proposal import stale_by_correction
    from memdir.memory import Memory

    root = tmp_path / ".memory"
    store = MemoryStore(root, Config(dir=root, embedder="none"))
    for name, description in [
        ("ci-jenkins", "CI runs on Jenkins"),
        ("builds", "Builds use Jenkins"),
        ("vault", "Jenkins credentials live in Vault"),
        ("staging-db", "The staging database is Postgres 16"),
        ("prod-db", "Production runs Postgres 17"),
        ("node", "Node 16 runs on the build agents"),
        ("region", "The staging region is eu-west-1"),
        ("backups", "Backups are stored in eu-west-1"),
    ]:
        store.write(name, type="project_fact", description=description)

    def stale(fact: str, said: str) -> set[str]:
        item = Memory("new", "user_preference", fact, fact)  # a small model's wording
        return set(stale_by_correction(store, item, said))

    said = "We switched CI from Jenkins to GitHub Actions on Monday."
    assert stale("The user prefers to use GitHub Actions for CI.", said) == {"ci-jenkins", "builds"}
    said = "Correction: we moved staging from Postgres 16 to 17 last week."
    assert stale("Staging runs Postgres 17", said) == {"staging-db"}
    said = "Staging is in us-east-2 now, not eu-west-1."
    assert stale("Staging is in us-east-2 now, not eu-west-1", said) == {"region"}
    assert stale("Deploys run from 9 to 5", "Deploys run from 9 to 5 on weekdays.") == set()
    assert stale("CI runs on GitHub Actions", "CI runs on GitHub Actions.") == set()
