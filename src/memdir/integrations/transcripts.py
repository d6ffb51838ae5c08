"""Reading the session files agent hosts write, as memdir messages.

Claude Code writes one JSON object a line with ``type`` ``user``/``assistant`` and the API
``message`` inside; Codex writes ``response_item`` lines whose ``payload`` is a ``message``
(``input_text``/``output_text`` parts), a ``function_call`` or a ``function_call_output``.
Plain ``{role, content}`` lines (also inside ``message``) are read too. Lines that are neither
(summaries, metadata, the environment context a host injects) are skipped; so is a torn last
line. ``memdir extract`` reads JSON lists and JSONL with the same ``message_from_row``.
This module does NOT extract memories: ``extract`` does, from what it returns.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from ..disk.statefile import parse_lines
from ..errors import MemdirError
from ..providers import Message

_INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md",
    "<permissions",
    "<system-reminder>",
    "<command-name>",
    "<local-command-stdout>",
)
MAX_BYTES = 20 * 1024 * 1024  # a transcript larger than this is read from its tail


def _text_parts(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text")
        )
    return ""


def message_from_row(row: Any) -> Message | None:
    """One line (or list item) of a transcript as a message; None for anything else."""
    if not isinstance(row, dict):
        return None
    if row.get("type") in ("user", "assistant") and isinstance(row.get("message"), dict):
        if row.get("isMeta") or row.get("isSidechain"):
            return None
        msg = row["message"]
        if msg.get("role") in ("user", "assistant") and isinstance(msg.get("content"), (str, list)):
            content = msg["content"]
            if isinstance(content, str) and content.lstrip().startswith(_INJECTED):
                return None
            return {"role": msg["role"], "content": content}
        return None
    if row.get("type") == "response_item" and isinstance(row.get("payload"), dict):
        p = row["payload"]
        kind = p.get("type")
        if kind == "message" and p.get("role") in ("user", "assistant"):
            text = _text_parts(p.get("content"))
            if not text.strip() or text.lstrip().startswith(_INJECTED):
                return None
            return {"role": p["role"], "content": text}
        if kind == "function_call":
            return {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": str(p.get("call_id", "")),
                        "name": str(p.get("name")),
                        "input": {},
                    }
                ],
            }
        if kind == "function_call_output":
            out = p.get("output")
            text = out if isinstance(out, str) else json.dumps(out)[:2000]
            return {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": str(p.get("call_id", "")),
                        "content": text[:2000],
                    }
                ],
            }
        return None
    msg = row.get("message", row)  # plain {role, content}, or wrapped in "message"
    if (
        isinstance(msg, dict)
        and msg.get("role") in ("user", "assistant")
        and isinstance(msg.get("content"), (str, list))
    ):
        if isinstance(msg["content"], str) and msg["content"].lstrip().startswith(_INJECTED):
            return None  # what a host put in front of the conversation, not the user's words
        return {"role": msg["role"], "content": msg["content"]}
    return None


def read_session(path: Path) -> list[Message]:
    """The user and assistant messages of a Claude Code or Codex session file, in order."""
    try:  # never a pipe or a device: a FIFO would block, /dev/zero would never end
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise MemdirError(
            f"cannot read the session file {path} ({exc.strerror}) — pass a readable file"
        ) from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise MemdirError(
                f"the session file {path} is not a regular file — point"
                " transcript_path at the session's .jsonl"
            )
        size = fh.seek(0, 2)
        fh.seek(max(0, size - MAX_BYTES))
        data = fh.read(MAX_BYTES).decode("utf-8", errors="replace")
    return [m for m in map(message_from_row, parse_lines(data)) if m is not None]
