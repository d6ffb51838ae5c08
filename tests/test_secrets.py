"""Credential detection: the corpus, redaction on automatic paths, refusal on manual ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memdir import MemoryStore, SecretFound
from memdir.secrets import redact, scan

DATA = Path(__file__).parent / "data"
CORPUS = {"secrets": [], "lookalikes": []}
for _name in ("secrets_corpus.json", "secrets_holdout.json"):
    for _key, _texts in json.loads((DATA / _name).read_text(encoding="utf-8")).items():
        CORPUS[_key] += _texts


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


def test_multi_part_tokens_are_redacted_whole() -> None:
    """A Discord bot token (three dot-separated parts) leaves no part behind."""
    token = "MTA5OTk4NzY1NDMyMTAxMjM0NQ.GhIjKl.abcdEFGHijklMNOPqrstUVWXyz0123456789ab"
    out, found = redact(f"bot token: {token}")
    assert found and not any(part in out for part in token.split("."))


def test_code_and_prose_about_secrets_stay(store: MemoryStore) -> None:
    """Naming a secret is not holding one: code that reads it and prose about it are kept."""
    body = ("password = get_password_from_vault(name)\napi_key=settings.OPENAI_API_KEY\n"
            "密码是用户自己设置的字符串。トークンは一時間ごとに更新されます。")
    store.write("auth-notes", type="reference", description="how auth works", body=body)
    assert store.get("auth-notes").body == body
