"""The agent's tools: bash, read_file, write_file, edit_file and save_memory.

Paths are confined to the project folder (symlinks resolved, so no link leads out), and the
memory folder is written only through save_memory, which applies the same validation and
secret redaction as every other write. Each tool returns text for the model; a refused or
failed call returns an error text (``is_error``) instead of raising.
This module does NOT call the model.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import MemdirError
from ..store import MemoryStore

OUTPUT_CAP = 20_000
BASH_TIMEOUT = 120.0
READ_CAP = 200_000

SCHEMAS: list[dict[str, Any]] = [
    {"name": "bash", "description": "Run a shell command in the project folder; returns its"
     " output (stdout and stderr) and exit code.",
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                      "required": ["command"]}},
    {"name": "read_file", "description": "Read a text file of the project.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                      "required": ["path"]}},
    {"name": "write_file", "description": "Create or overwrite a text file of the project.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"},
                                                       "content": {"type": "string"}},
                      "required": ["path", "content"]}},
    {"name": "edit_file", "description": "Replace one exact, unique occurrence of old_text"
     " with new_text in a file of the project.",
     "input_schema": {"type": "object", "properties": {
         "path": {"type": "string"}, "old_text": {"type": "string"},
         "new_text": {"type": "string"}}, "required": ["path", "old_text", "new_text"]}},
    {"name": "save_memory", "description": "Save something to long-term memory when the user"
     " asks you to remember it (or update the memory of that name).",
     "input_schema": {"type": "object", "properties": {
         "name": {"type": "string", "description": "lowercase-hyphenated"},
         "type": {"type": "string", "enum": ["user_preference", "project_fact", "feedback",
                                             "reference"]},
         "description": {"type": "string", "description": "one line"},
         "body": {"type": "string"}},
                      "required": ["name", "type", "description", "body"]}},
]


@dataclass
class ToolResult:
    """What a tool call produced."""

    text: str
    is_error: bool = False
    saved: str | None = None  # the memory save_memory wrote, for the REPL's notice


class ToolError(Exception):
    """A refused or failed tool call; its message goes back to the model."""


def _cap(text: str, limit: int = OUTPUT_CAP) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - limit} characters cut …]\n{text[-half:]}"


class Tools:
    """The tools of one agent, bound to a project folder and a memory store."""

    def __init__(self, root: Path, store: MemoryStore, *, bash_timeout: float = BASH_TIMEOUT):
        self.root = root.resolve()
        self.store = store
        self.bash_timeout = bash_timeout
        self.memory_root = store.root.resolve()
        self._handlers: dict[str, Callable[[dict[str, Any]], ToolResult]] = {
            "bash": self.bash, "read_file": self.read_file, "write_file": self.write_file,
            "edit_file": self.edit_file, "save_memory": self.save_memory}

    @property
    def schemas(self) -> list[dict[str, Any]]:
        """The tool schemas to send to the model."""
        return SCHEMAS

    def run(self, name: str, args: dict[str, Any]) -> ToolResult:
        """Run one tool call; errors become error results, never exceptions."""
        handler = self._handlers.get(name)
        if handler is None:
            return ToolResult(f"unknown tool {name!r}", is_error=True)
        try:
            return handler(args if isinstance(args, dict) else {})
        except ToolError as exc:
            return ToolResult(str(exc), is_error=True)
        except MemdirError as exc:
            return ToolResult(str(exc), is_error=True)
        except (OSError, UnicodeError) as exc:
            return ToolResult(f"{name} failed: {exc}", is_error=True)

    def resolve(self, raw: Any, *, writing: bool = False) -> Path:
        """The absolute path inside the project that ``raw`` names; ToolError if it is not."""
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError("a non-empty 'path' is required")
        path = (self.root / raw).resolve()
        if not path.is_relative_to(self.root):
            raise ToolError(f"refused: {raw} is outside the project folder {self.root}")
        if writing and path.is_relative_to(self.memory_root):
            raise ToolError("refused: memory files are written with the save_memory tool")
        return path

    def bash(self, args: dict[str, Any]) -> ToolResult:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("a non-empty 'command' is required")
        proc = subprocess.Popen(["bash", "-c", command], cwd=self.root, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=self.bash_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            text = out.decode(errors="replace")
            return ToolResult(_cap(text) + f"\n[timed out after {self.bash_timeout:.0f}s;"
                              " killed]", is_error=True)
        except KeyboardInterrupt:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        text = out.decode(errors="replace")
        return ToolResult(_cap(text) + f"\n[exit code {proc.returncode}]",
                          is_error=proc.returncode != 0)

    def read_file(self, args: dict[str, Any]) -> ToolResult:
        path = self.resolve(args.get("path"))
        if not path.is_file():
            raise ToolError(f"no such file: {args.get('path')}")
        data = path.read_bytes()[:READ_CAP]
        return ToolResult(_cap(data.decode("utf-8", errors="replace")))

    def write_file(self, args: dict[str, Any]) -> ToolResult:
        path = self.resolve(args.get("path"), writing=True)
        content = args.get("content")
        if not isinstance(content, str):
            raise ToolError("'content' must be text")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        return ToolResult(f"wrote {len(content)} characters to {path.relative_to(self.root)}")

    def edit_file(self, args: dict[str, Any]) -> ToolResult:
        path = self.resolve(args.get("path"), writing=True)
        old, new = args.get("old_text"), args.get("new_text")
        if not isinstance(old, str) or not old or not isinstance(new, str):
            raise ToolError("'old_text' (non-empty) and 'new_text' are required")
        if not path.is_file():
            raise ToolError(f"no such file: {args.get('path')}")
        text = path.read_text(encoding="utf-8")
        count = text.count(old)
        if count != 1:
            raise ToolError(f"old_text occurs {count} times in {args.get('path')}; it must occur"
                            " exactly once — include more context")
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        return ToolResult(f"edited {path.relative_to(self.root)}")

    def save_memory(self, args: dict[str, Any]) -> ToolResult:
        fields = {k: str(args.get(k) or "").strip() for k in ("name", "type", "description",
                                                               "body")}
        existed = fields["name"] in self.store
        mem = self.store.write(fields["name"], type=fields["type"],
                               description=fields["description"], body=fields["body"],
                               source="agent", secrets="redact", reason="saved by the agent")
        verb = "updated" if existed else "saved"
        return ToolResult(f"{verb} memory {mem.name}", saved=f"{verb} {mem.name}")
