"""Coding conventions: slots read by memdir's own rules, and extraction landing each
convention as its own standing rule that only a rule of the same slot replaces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memdir.code.conventions import Convention, one, read, reported, split
from memdir.config import Config
from memdir.learn.extract import extract_memories
from memdir.standing import standing
from memdir.store import MemoryStore
from memdir_testing import FakeModel


@pytest.mark.parametrize(
    ("text", "slot", "value"),
    [
        ("always start function names with 'x_'", "function name prefix", "x_"),
        ("From now on, function names should begin with 'fn_'.", "function name prefix", "fn_"),
        ("always end method names with '_a'", "method name suffix", "_a"),
        ("always start function argument names with 'e_'", "argument name prefix", "e_"),
        ("always include the string 'chx' in variable names", "variable name includes", "chx"),
        ("always include a single digit in class names", "class name digit", "always"),
        ("always use CamelCase for class names", "class name case", "camelCase"),
        ("Class names must be in snake_case", "class name case", "snake_case"),
        (
            "always add the '@retry' decorator from the 'pedantic' module to all methods",
            "method decorator @retry",
            "always",
        ),
        ("Decorate all classes with @timer_class", "class decorator @timer_class", "always"),
        (
            "always import the 'mailbox' module even if it is not used",
            "code import mailbox",
            "always",
        ),
        ("never import the 'pickle' module", "code import pickle", "never"),
        ("always use docstrings in methods", "method docstrings", "always"),
        ("always include try statements in functions", "function try statements", "always"),
        ("always use annotations for functions", "function annotations", "always"),
        ("We use pnpm for packages, never npm.", "tooling package manager", "pnpm"),
        ("never use a linter", "tooling linter", "never"),
        ("Indent with 4 spaces", "code indentation", "4 spaces"),
        ("use Slack for communication", "practice what to use for communication", "Slack"),
        ("take a break every 80 minutes", "practice take break every N minutes", "80"),
        (
            "Do not commit directly to the dev branch",
            "practice commit directly to dev branch",
            "never",
        ),
    ],
)
def test_a_convention_is_read_as_its_slot_and_value(text: str, slot: str, value: str) -> None:
    conv = one(text)
    assert conv is not None and (conv.slot, conv.value) == (slot, value)


def test_rules_that_share_words_but_not_a_slot_are_different_rules() -> None:
    mailbox = one("always import the 'mailbox' module even if it is not used")
    secrets = one("always import the 'secrets' module even if it is not used")
    retry = one("always add the '@retry' decorator from the 'pedantic' module to all methods")
    validate = one("always add the '@validate' decorator from the 'pedantic' module to all methods")
    assert mailbox and secrets and mailbox.slot != secrets.slot
    assert retry and validate and retry.slot != validate.slot
    docstrings = one("always use docstrings in functions")
    prefix = one("From now on always start function names with 'fn_'")
    assert docstrings and prefix and docstrings.slot != prefix.slot


def test_text_with_no_rule_or_several() -> None:
    assert read("We had a lovely chat about the holidays and team lunches.") == []
    both = "Start function names with 'x_'. Also always use docstrings in functions."
    assert [c.slot for c in read(both)] == ["function name prefix", "function docstrings"]
    assert one(both) is None
    assert split(both) == [
        "Start function names with 'x_'.",
        "Also always use docstrings in functions.",
    ]
    assert reported("The user discussed: flexible work hours")
    assert not reported("We discussed it: always use pnpm")


def test_what_code_breaks_a_convention() -> None:
    prefix = Convention("function", "name prefix", "x_")
    code = "def x_ok():\n    pass\n\ndef bad():\n    pass\n\nclass A:\n    def m(self): pass\n"
    assert prefix.breaks(code) == [
        "line 4: function 'bad' does not follow “function name prefix x_”"
    ]
    deco = one("always add the '@count_calls' decorator to all methods")
    assert deco is not None
    assert deco.breaks("class A:\n    @count_calls\n    def m(self): pass\n") == []
    assert deco.breaks("class A:\n    def m(self): pass\n") == [
        "line 2: 'm' lacks the @count_calls decorator"
    ]
    mailbox = one("always import the 'mailbox' module")
    assert mailbox is not None and mailbox.breaks("import os\n") == [
        "the code does not import mailbox"
    ]
    assert mailbox.breaks("import mailbox\n") == []
    assert prefix.breaks("def broken(:\n") == []  # not whole Python: nothing can be told
    pnpm = one("always use pnpm, never npm")
    assert pnpm is not None and pnpm.breaks("npm install left-pad") != []
    assert pnpm.breaks("pnpm add left-pad") == []


def _store(tmp_path: Path) -> MemoryStore:
    root = tmp_path / ".memory"
    return MemoryStore(root, Config(dir=root, embedder="none"))


def _learn(store: MemoryStore, said: str, *rules: str) -> None:
    """The user says ``said``; a perfect extractor hands memdir each rule as a memory."""
    items = [
        {"action": "create", "name": "", "type": "feedback", "description": r, "body": r}
        for r in rules
    ]
    talk = [{"role": "user", "content": said}, {"role": "assistant", "content": "Got it."}]
    extract_memories(store, talk, FakeModel([json.dumps({"memories": items})]))


def _rules(store: MemoryStore) -> str:
    return standing(store, 2000, 200, 25_000).text.split("<memory_index>")[0]


def test_a_correction_replaces_its_slot_never_a_neighbour(tmp_path: Path) -> None:
    """ "From now on start function names with 'fn_'" updates the prefix rule and nothing
    else; docstrings, asserts and try statements stay standing."""
    store = _store(tmp_path)
    first = [
        "always start function names with 'x_'",
        "always use docstrings in functions",
        "always include assert statements in functions",
        "always include try statements in functions",
    ]
    _learn(store, " ".join(f"Please {r}." for r in first), *first)
    update = "From now on always start function names with 'fn_'"
    _learn(store, f"{update}.", update)
    rules = _rules(store)
    assert "'fn_'" in rules and "'x_'" not in rules
    for kept in first[1:]:
        assert kept in rules
    assert len([e for e in store.entries() if e.type == "feedback"]) == 4
    old = store.history("function-name-prefix")
    assert any("'x_'" in store.version_text("function-name-prefix", v.version) for v in old)


def test_two_rules_that_differ_in_one_value_both_stand(tmp_path: Path) -> None:
    store = _store(tmp_path)
    mailbox = "always import the 'mailbox' module even if it is not used"
    secrets = "always import the 'secrets' module even if it is not used"
    _learn(store, f"Please {mailbox}.", mailbox)
    _learn(store, f"Also {secrets}.", secrets)
    rules = _rules(store)
    assert mailbox in rules and secrets in rules


def test_several_conventions_in_one_item_become_one_rule_each(tmp_path: Path) -> None:
    store = _store(tmp_path)
    both = "Start function names with 'x_'. Always use docstrings in functions."
    _learn(store, both, both)
    names = sorted(e.name for e in store.entries())
    assert names == ["function-docstrings", "function-name-prefix"]


def test_chit_chat_is_no_rule(tmp_path: Path) -> None:
    store = _store(tmp_path)
    talk = "We discussed flexible work hours over coffee."
    _learn(store, talk, "The user discussed: flexible work hours")
    assert "flexible" not in _rules(store)
    assert [e.type for e in store.entries()] == ["project_fact"]


def test_hostile_text_is_read_in_bounded_time() -> None:
    """A 300 KB body, or one made of the words the rules look for, is read at once (its
    first characters only): a rule is short."""
    assert read("x" * 300_000) == []
    assert read("@" * 5000 + " decorator to all methods") == []
    many = "always start function names with 'a_'. " * 2000
    assert [c.slot for c in read(many)] == ["function name prefix"]
