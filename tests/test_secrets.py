"""Credential detection: the corpus, redaction on automatic paths, refusal on manual ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memdir import MemoryStore, SecretFound
from memdir.secrets import redact, scan

CORPUS = json.loads((Path(__file__).parent / "data" / "secrets_corpus.json").read_text())


@pytest.mark.parametrize("text", CORPUS["secrets"])
def test_every_credential_format_is_caught(text: str) -> None:
    """Keys, tokens, private keys and passwords in URLs and assignments are found."""
    redacted, findings = redact(text)
    assert findings, text
    assert "[REDACTED:" in redacted
    for f in findings:
        assert text[f.start : f.end] not in redacted


@pytest.mark.parametrize("text", CORPUS["lookalikes"])
def test_look_alikes_stay_untouched(text: str) -> None:
    """Commit hashes, UUIDs, base64 of text and ordinary prose are not flagged."""
    assert scan(text) == []
    assert redact(text)[0] == text


def test_redaction_keeps_the_rest_of_the_text() -> None:
    """Only the secret part goes: the user name and host of a URL stay."""
    out, _ = redact("connect to postgres://admin:hunter2hunter2@db:5432/app please")
    assert out == "connect to postgres://admin:[REDACTED:password in URL]@db:5432/app please"


def test_store_refuses_by_default_and_redacts_when_asked(store: MemoryStore) -> None:
    """The API refuses credentials unless told to redact (automatic paths) or allow them."""
    token = "ghp_" + "Ab1" * 12
    with pytest.raises(SecretFound, match="GitHub token"):
        store.write("t", type="reference", description="ci token", body=f"use {token}")
    assert store.entries() == []
    store.write("t", type="reference", description="ci token", body=f"use {token}",
                secrets="redact")
    assert store.get("t").body == "use [REDACTED:GitHub token]"
    assert token not in (store.root / "t.md").read_text()
