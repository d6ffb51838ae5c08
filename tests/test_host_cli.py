"""The host's CLI as the memory model: a fake ``claude`` and ``codex`` on PATH stand in for the
real ones (same flags, same output shapes)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memdir.errors import LLMError, LLMUnavailable
from memdir.layout import NESTED_MARK
from memdir.providers.host_cli import HostCLIModel
from memdir.usage import UsageLog


def fake(bin_dir: Path, name: str, script: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


def test_claude_answers_with_its_result_and_usage_is_logged(bin_dir: Path, tmp_path: Path) -> None:
    # the prompt arrives on stdin, flattened; the flags are those of 'claude -p'
    """The Claude Code CLI as a memory model answers with its result, and its usage is logged."""
    fake(
        bin_dir,
        "claude",
        f'cat > {tmp_path}/prompt; echo "$@" > {tmp_path}/argv\n'
        'echo \'{"type":"result","result":"{\\"names\\": []}",'
        '"usage":{"input_tokens":12,"output_tokens":3}}\'\n',
    )
    log = UsageLog(tmp_path / "usage.jsonl")
    model = HostCLIModel("claude-code", "haiku", log)
    reply = model.complete(
        system="Pick memories.",
        messages=[{"role": "user", "content": "which test runner?"}],
        json_mode=True,
        purpose="select",
    )
    assert reply.text == '{"names": []}'
    prompt = (tmp_path / "prompt").read_text()
    assert prompt.startswith(NESTED_MARK + "\n\nPick memories.")  # memdir's own session
    assert "user: which test runner?" in prompt
    assert prompt.rstrip().endswith("Answer with only the JSON object.")
    assert (tmp_path / "argv").read_text().split() == [
        "-p", "--output-format", "json", "--model", "haiku",
    ]  # fmt: skip
    [row] = log.rows()
    assert (row["purpose"], row["provider"], row["input_tokens"], row["ok"]) == (
        "select",
        "claude-code",
        12,
        True,
    )


def test_codex_answers_with_its_last_agent_message(bin_dir: Path, tmp_path: Path) -> None:
    """The Codex CLI as a memory model answers with its last agent message."""
    events = [
        {"type": "item.completed", "item": {"type": "reasoning", "text": "thinking"}},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "pytest"}},
        {"type": "turn.completed", "usage": {"input_tokens": 40, "output_tokens": 2}},
    ]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    fake(bin_dir, "codex", f"cat > /dev/null; cat {tmp_path}/events.jsonl\n")
    reply = HostCLIModel("codex", "", None).complete(
        system="", messages=[{"role": "user", "content": "runner?"}]
    )
    assert reply.text == "pytest" and reply.usage.input_tokens == 40


def test_failures_are_one_line_llm_errors(bin_dir: Path, tmp_path: Path) -> None:
    """A host CLI's failures are one-line LLM errors."""
    fake(bin_dir, "claude", "cat > /dev/null; echo 'not logged in' >&2; exit 3\n")
    log = UsageLog(tmp_path / "usage.jsonl")
    model = HostCLIModel("claude-code", "", log)
    with pytest.raises(LLMError, match="exit code 3: not logged in"):
        model.complete(system="", messages=[{"role": "user", "content": "hi"}])
    assert log.rows()[0]["ok"] is False  # a failed call is counted too
    fake(bin_dir, "claude", "cat > /dev/null; echo 'Usage: claude [options]'\n")
    with pytest.raises(LLMError, match="did not print JSON"):
        model.complete(system="", messages=[{"role": "user", "content": "hi"}])
    fake(bin_dir, "claude", 'cat > /dev/null; echo \'{"is_error": true, "result": "quota"}\'\n')
    with pytest.raises(LLMError, match="reported an error: quota"):
        model.complete(system="", messages=[{"role": "user", "content": "hi"}])
    fake(bin_dir, "codex", 'cat > /dev/null; echo \'{"type": "turn.completed"}\'\n')
    with pytest.raises(LLMError, match="codex exec gave no answer"):
        HostCLIModel("codex", "", None).complete(system="", messages=[])


def test_a_missing_or_unknown_host_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing or unknown host is unavailable."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LLMUnavailable, match="'claude' is not on PATH"):
        HostCLIModel("claude-code", "", None)
    with pytest.raises(LLMUnavailable, match="unknown host 'cursor'"):
        HostCLIModel("cursor", "", None)
