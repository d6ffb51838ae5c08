"""Credential detection: the corpus, redaction on automatic paths, refusal on manual ones."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from memdir import MemoryStore, SecretFound
from memdir.gate.secrets import redact, scan
from memdir_agent.tools import Tools

from conftest import CliFn

DATA = Path(__file__).parent / "data"
CORPUS = {"secrets": [], "lookalikes": []}
for _name in (
    "secrets_corpus.json",
    "secrets_holdout.json",
    "secrets_holdout_r3.json",
    "secrets_holdout_r3b.json",
):
    for _key, _texts in json.loads((DATA / _name).read_text(encoding="utf-8")).items():
        if _key in CORPUS:
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
    store.write(
        "t", type="reference", description="ci token", body=f"use {token}", secrets="redact"
    )
    assert store.get("t").body == "use [REDACTED:GitHub token]"
    assert token not in (store.root / "t.md").read_text()


def test_multi_part_tokens_are_redacted_whole() -> None:
    """A Discord bot token (three dot-separated parts) leaves no part behind."""
    token = "MTA5OTk4NzY1NDMyMTAxMjM0NQ.GhIjKl.abcdEFGHijklMNOPqrstUVWXyz0123456789ab"
    out, found = redact(f"bot token: {token}")
    assert found and not any(part in out for part in token.split("."))


def test_code_and_prose_about_secrets_stay(store: MemoryStore) -> None:
    """Naming a secret is not holding one: code that reads it and prose about it are kept."""
    body = (
        "password = get_password_from_vault(name)\napi_key=settings.OPENAI_API_KEY\n"
        "密码是用户自己设置的字符串。トークンは一時間ごとに更新されます。"
    )
    store.write("auth-notes", type="reference", description="how auth works", body=body)
    assert store.get("auth-notes").body == body


def test_a_secret_split_across_fields_is_caught(store: MemoryStore, cli: CliFn) -> None:
    """The label in the description (or name) and the value in the body: refused by hand,
    redacted on automatic paths, whole."""
    r = cli(
        "add",
        "pw1",
        "--type",
        "reference",
        "-d",
        "The staging database password",
        "--body",
        "Tr0ub4dor&3",
    )
    assert r.code == 1 and "the body looks like it contains a credential (password)" in r.err
    tools = Tools(store.root.parent, store)
    tools.run(
        "save_memory",
        {
            "name": "staging_db_password",
            "type": "project_fact",
            "description": "The staging database password is [REDACTED:password]",
            "body": "Tr0ub4dor&3",
        },
    )
    text = (store.root / "staging-db-password.md").read_text()  # (names: lower-case-hyphens)
    assert "Tr0ub4dor" not in text and "[REDACTED:password]" in text
    store.write(
        "db",
        type="project_fact",
        description="Staging DB",
        body="The password is Tr0ub4dor&amp;3 now.",
        secrets="redact",
    )
    assert store.get("db").body == "The password is [REDACTED:password] now."


def test_purge_removes_a_secret_from_history(store: MemoryStore, cli: CliFn) -> None:
    """rm --purge takes a memory and every kept version away for good, after confirming;
    NAME@vN purges one version."""
    store.write("db", type="project_fact", description="DB", body="v1 Hunter22!x", secrets="allow")
    store.write("db", type="project_fact", description="DB", body="v2 clean")
    store.write("db", type="project_fact", description="DB", body="v3 clean")
    assert [v.version for v in store.history("db")] == [1, 2]
    r = cli("rm", "--purge", "db@v1")
    assert r.code == 1 and r.err == (
        "memdir: error: purging version 1 of db cannot be undone — confirm with --yes\n"
    )
    r = cli("rm", "--purge", "db@v1", "--yes")
    assert r.code == 0 and "Purged version 1 of db (1 version removed)" in r.out
    assert [v.version for v in store.history("db")] == [2]
    kept = [p.read_bytes().lower() for p in store.internal.rglob("*") if p.is_file()]
    assert kept and not any(b"hunter22" in data for data in kept)  # the index included
    r = cli("rm", "--purge", "db", "--yes")
    assert r.code == 0 and "db" not in store and store.history("db") == []
    r = cli("rm", "--purge", "db", "--yes")
    assert r.code == 1 and "no 'db' to purge" in r.err
    r = cli("rm", "db@v2")
    assert r.code == 1 and "only with --purge" in r.err


def test_handed_over_conversations_are_private_and_redacted(tmp_path: Path) -> None:
    """What an exiting agent hands over to the user's worker (a job of the store's queue)
    holds no credential and is 0600."""
    import os
    import stat

    from memdir import jobs
    from memdir_agent.worker import MemoryWorker, hand_over

    state = tmp_path / "state"
    release = threading.Event()
    worker = MemoryWorker(lambda kind, text: None, lambda work: hand_over(state, work))
    worker.submit("slow", lambda: str(release.wait(10)) and None)
    worker.submit(
        "extract",
        lambda: None,
        {
            "messages": [
                {"role": "user", "content": "the staging password is Tr0ub4dor&3, remember it"},
                {
                    "role": "assistant",
                    "content": [
                        {  # the agent's own call splits label and value
                            "type": "tool_use",
                            "id": "call_Xk29pLq7ZaB3cD4eF5gH6iJ7",
                            "name": "save_memory",
                            "input": {
                                "name": "staging_password",
                                "type": "project_fact",
                                "description": "The staging database password",
                                "body": "Tr0ub4dor&3",
                            },
                        }
                    ],
                },
            ]
        },
    )
    assert worker.close(0.05) == ["slow", "extract"]
    release.set()
    files = jobs.queued(state, "handover")
    assert len(files) == 1, "the extraction was not handed over"
    for f in files:
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o600
        assert "Tr0ub4dor" not in f.read_text() and "[REDACTED:password]" in f.read_text()
        assert "call_Xk29pLq7ZaB3cD4eF5gH6iJ7" in f.read_text()  # ids pair calls and results
