"""The agent host itself as the memory model: ``claude -p`` or ``codex exec``, headless.

For people who run Claude Code or Codex on a subscription and have no API key: the memory
model's prompt (system and messages, flattened to text) goes to the host's headless mode and
its final answer comes back as the reply. Text only: no tools, no streaming. Each call starts
the host's CLI, so it takes seconds and counts against the subscription like any other prompt.
Each call runs in a fresh owner-only folder of its own under the user's cache folder (never the
shared temporary folder, where any local user may plant ``CLAUDE.md``, ``AGENTS.md`` or a
``.claude/settings.json`` with hooks), removed afterwards; Claude Code loads the user's settings
only (``--setting-sources user``), Codex works in that folder (``-C``).
This module does NOT find or install the host: its command must be on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ..disk.layout import NESTED_ENV, NESTED_MARK
from ..disk.statefile import parse_lines
from ..errors import LLMError, LLMUnavailable
from ..gate.safetext import speaker_turn
from ..usage import UsageLog
from . import RecordingModel, Reply, Request, Usage

HOSTS = {"claude-code": "claude", "codex": "codex"}


def _flatten(request: Request) -> str:
    parts = [NESTED_MARK]
    parts += [request.system.strip()] if request.system.strip() else []
    for msg in request.messages:
        content = msg.get("content", "")
        text = (
            content
            if isinstance(content, str)
            else "\n".join(
                b.get("text", "")
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            )
        )
        parts.append(speaker_turn(str(msg.get("role", "user")), text))
    if request.json_mode:
        parts.append("Answer with only the JSON object.")
    return "\n\n".join(parts)


class HostCLIModel(RecordingModel):
    """A model call answered by ``claude -p --output-format json`` or ``codex exec --json``."""

    def __init__(
        self,
        host: str,
        model: str,
        usage_log: UsageLog | None,
        timeout: float = 120.0,
        *,
        workspace: Path,
    ) -> None:
        super().__init__(model, usage_log)
        self.workspace = workspace  # each call's private folder is made in here
        if host not in HOSTS:
            raise LLMUnavailable(f"unknown host {host!r} — use one of {', '.join(HOSTS)}")
        self.provider = host
        self.command = HOSTS[host]
        self.timeout = timeout
        if shutil.which(self.command) is None:
            raise LLMUnavailable(
                f"'{self.command}' is not on PATH — install {host} or"
                " configure an API key for the memory model"
            )

    def _argv(self, where: str) -> list[str]:
        if self.provider == "claude-code":
            argv = [self.command, "-p", "--output-format", "json", "--setting-sources", "user"]
            return argv + (["--model", self.model] if self.model else [])
        argv = [self.command, "exec", "--json", "--skip-git-repo-check", "-C", where]
        return argv + (["--model", self.model] if self.model else []) + ["-"]

    def _private_folder(self) -> str:
        """A new folder only this user may enter, for one call."""
        try:
            self.workspace.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(self.workspace, 0o700)
            return tempfile.mkdtemp(prefix="call-", dir=self.workspace)  # made 0700
        except OSError as exc:
            raise LLMUnavailable(
                f"cannot make a private folder for {self.command} in {self.workspace}"
                f" ({exc.strerror})"
            ) from None

    def _call(self, request: Request) -> Reply:
        # a nested session runs no memdir hook (the marker), and starts in a private folder of
        # its own, so that no project's or other user's hooks or instructions are loaded
        env = {**os.environ, NESTED_ENV: "1"}
        where = self._private_folder()
        try:
            proc = subprocess.run(
                self._argv(where),
                input=_flatten(request),
                capture_output=True,
                text=True,
                timeout=self.timeout,
                env=env,
                cwd=where,
            )
        except subprocess.TimeoutExpired:
            raise LLMError(f"{self.command} did not answer within {self.timeout:.0f}s") from None
        except OSError as exc:
            raise LLMUnavailable(f"cannot run {self.command} ({exc.strerror})") from None
        finally:
            shutil.rmtree(where, ignore_errors=True)  # (whatever the host left there)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
            raise LLMError(f"{self.command} failed with exit code {proc.returncode}: {last}")
        text, usage = (
            self._claude(proc.stdout)
            if self.provider == "claude-code"
            else self._codex(proc.stdout)
        )
        return Reply([{"type": "text", "text": text}], usage=usage, model=self.model)

    def _claude(self, out: str) -> tuple[str, Usage]:
        try:
            data: Any = json.loads(out)
        except ValueError:
            raise LLMError("claude -p did not print JSON — is it an old version?") from None
        if isinstance(data, list):  # some versions print every event
            data = next((d for d in reversed(data) if d.get("type") == "result"), {})
        if not isinstance(data, dict) or data.get("is_error"):
            raise LLMError(f"claude -p reported an error: {str(data.get('result', ''))[:200]}")
        usage = data.get("usage") or {}
        return str(data.get("result", "")), Usage(
            int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
        )

    def _codex(self, out: str) -> tuple[str, Usage]:
        text, usage = "", Usage()
        for event in parse_lines(out):
            item = event.get("item")
            if isinstance(item, dict) and item.get("type") in (
                "agent_message",
                "assistant_message",
            ):
                text = str(item.get("text", text))
            if event.get("type") == "turn.completed":
                u = event.get("usage") or {}
                usage = Usage(int(u.get("input_tokens", 0)), int(u.get("output_tokens", 0)))
        if not text:
            raise LLMError("codex exec gave no answer")
        return text, usage
