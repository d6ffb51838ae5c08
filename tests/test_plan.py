"""Plans as values, and the secrets screen of what a plan would write."""

from __future__ import annotations

import pytest

from memdir.errors import SecretFound
from memdir.memory import Memory
from memdir.plan import Put, Remove, screen

KEY = "sk-ant-api03-" + "x7Kq9" * 12


def put(**kw: object) -> Put:
    fields: dict[str, object] = {
        "name": "deploy",
        "type": "project_fact",
        "description": "How to deploy",
        "body": "run make deploy",
    }
    fields.update(kw)
    return Put(Memory(**fields))  # type: ignore[arg-type]


def test_refuse_names_the_field_that_holds_a_credential() -> None:
    """A refused plan names the field that holds the credential."""
    with pytest.raises(SecretFound, match="body"):
        screen([put(body=f"export ANTHROPIC_API_KEY={KEY}")], "refuse")
    with pytest.raises(SecretFound, match="field 'token'"):
        screen([put(extra={"token": KEY})], "refuse")
    with pytest.raises(SecretFound, match=r"tags\[1\]"):
        screen([put(extra={"tags": ["ok", KEY]})], "refuse")


def test_redact_keeps_the_memory_without_the_secret() -> None:
    """Redact keeps the memory without the secret."""
    [out] = screen([put(body=f"key is {KEY} for prod", extra={"env": {"key": KEY}})], "redact")
    assert isinstance(out, Put)
    assert KEY not in out.memory.body and "[REDACTED" in out.memory.body
    assert "for prod" in out.memory.body and KEY not in str(out.memory.extra)


def test_a_secret_in_the_name_becomes_a_usable_name() -> None:
    """A secret in the name becomes a usable name."""
    [out] = screen([put(name=f"key-{KEY}")], "redact")
    assert isinstance(out, Put) and KEY not in out.memory.name and out.memory.name


def test_allow_and_removes_pass_untouched_and_a_bad_policy_is_refused() -> None:
    """secrets="allow" and removals pass untouched, and an unknown policy is refused."""
    plan = [put(body=KEY), Remove("old", reason="stale")]
    assert screen(plan, "allow") == plan
    assert screen([Remove("old")], "refuse") == [Remove("old")]
    with pytest.raises(ValueError, match="unknown secrets policy"):
        screen(plan, "maybe")
