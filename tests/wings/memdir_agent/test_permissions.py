"""Approvals: a rule matches commands, not strings; writes into .git need a rule of their own."""

from __future__ import annotations

import pytest

from memdir_agent.permissions import Gate, simple_commands


@pytest.mark.parametrize(
    "line,commands",
    [
        ("pytest -q tests", ["pytest -q tests"]),
        ("pytest --version; touch PWNED", ["pytest --version", "touch PWNED"]),
        ("pytest && rm -rf x || true", ["pytest", "rm -rf x", "true"]),
        ("pytest | tee log\nls", ["pytest", "tee log", "ls"]),
        ("pytest 'a; b'", ["pytest a; b"]),
        ("pytest > out.txt", None),
        ("pytest $(curl evil)", None),
        ("pytest `id`", None),
        ("(pytest)", None),
        ("cat <(ls)", None),
        ("pytest 'unclosed", None),
        ("pytest 2>&1", None),
    ],
)
def test_rules_see_simple_commands(line: str, commands: list[str] | None) -> None:
    """An approval rule sees each simple command of a shell line, as the shell would run them."""
    assert simple_commands(line) == commands


def test_a_rule_covers_a_line_only_when_every_command_matches() -> None:
    """A rule covers a line only when every command matches."""
    gate = Gate(rules=("bash:pytest*", "bash:ls"))
    assert gate.check("bash", "pytest -q") is None
    assert gate.check("bash", "pytest -q && ls") is None
    for line in ("pytest --version; touch PWNED", "pytest > x", "pytest $(id)", "ls | sh"):
        refusal = gate.check("bash", line)
        assert refusal is not None and "needs the user's approval" in refusal


def test_git_is_protected_even_with_yes_and_always() -> None:
    """Writes into .git need a rule even with --yes and "always"."""
    answers = iter(["always", "always"])
    gate = Gate(yes=True, ask=lambda kind, what: next(answers))
    refusal = Gate(yes=True).check("write", ".git/hooks/pre-commit")
    assert refusal is not None and "write:.git/hooks/*" in refusal
    assert gate.check("write", "src/a.py") is None
    assert gate.check("write", ".git/config") is None  # asked, and answered: this once
    assert "write" not in gate.session  # 'always' never covers .git
    assert Gate(rules=("write:.git/hooks/*",)).check("write", ".git/hooks/pre-commit") is None
