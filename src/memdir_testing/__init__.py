"""A kit for tests, memdir's own and those of projects built on it: ``FakeModel``.

``FakeModel`` is a ``ChatModel`` that returns scripted replies and records every call, so the
logic around a model can be tested without a network or an SDK.
This module does NOT start servers (the test suite has a wire-level fake server for that).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, TypedDict

from memdir.errors import LLMError
from memdir.providers import (
    Block,
    JSONSchema,
    Message,
    Reply,
    TextCallback,
    ToolInput,
    ToolSpec,
    Usage,
)


class Call(TypedDict):
    """One call a FakeModel received, as ``calls`` records it."""

    system: str
    messages: list[Message]
    tools: list[ToolSpec] | None
    max_tokens: int
    purpose: str
    json_mode: bool
    schema: JSONSchema | None


# a reply: text, a JSON object or list (sent as its text), a Reply, an error, or a function
Scripted = str | dict[str, Any] | list[Any] | Reply | Exception | Callable[[Call], Any]


class FakeModel:
    """A scripted model: each call takes the next reply; every call is recorded in ``calls``.

    A reply may be text, a dict or list (sent as JSON text), a ``Reply``, an exception to
    raise, or a function of the call's arguments returning any of those.
    """

    provider = "fake"

    def __init__(
        self,
        replies: Iterable[Scripted] = (),
        *,
        default: Scripted | None = None,
        model: str = "fake-model",
    ) -> None:
        self.replies: list[Scripted] = list(replies)
        self.default = default
        self.model = model
        self.calls: list[Call] = []

    def queue(self, *replies: Scripted) -> None:
        """Add replies to the script."""
        self.replies.extend(replies)

    def complete(
        self,
        *,
        system: str,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        max_tokens: int = 1024,
        purpose: str = "agent",
        json_mode: bool = False,
        on_text: TextCallback | None = None,
        schema: JSONSchema | None = None,
    ) -> Reply:
        """Record the call and return (or raise) the next scripted reply."""
        call: Call = {
            "system": system,
            "messages": json.loads(json.dumps(messages)),
            "tools": tools,
            "max_tokens": max_tokens,
            "purpose": purpose,
            "json_mode": json_mode,
            "schema": schema,
        }
        self.calls.append(call)
        if self.replies:
            item = self.replies.pop(0)
        elif self.default is not None:
            item = self.default
        else:
            raise LLMError("FakeModel has no scripted reply left — queue one more")
        reply = self._to_reply(item, call)
        if on_text is not None and reply.text:
            for i in range(0, len(reply.text), 8):
                on_text(reply.text[i : i + 8])
        return reply

    def _to_reply(self, item: Scripted, call: Call) -> Reply:
        if callable(item) and not isinstance(item, (Reply, Exception)):
            item = item(call)
        if isinstance(item, Exception):
            raise item
        if isinstance(item, Reply):
            return item
        if isinstance(item, (dict, list)):
            item = json.dumps(item, ensure_ascii=False)
        if not isinstance(item, str):
            raise TypeError(f"FakeModel cannot reply with {type(item).__name__}")
        return Reply(
            [{"type": "text", "text": item}],
            "end_turn",
            Usage(sum(len(str(m["content"])) for m in call["messages"]) // 4, len(item) // 4),
            self.model,
        )


def tool_reply(*calls: tuple[str, ToolInput], text: str = "") -> Reply:
    """A Reply that calls tools: ``tool_reply(("bash", {"command": "ls"}))``."""
    blocks: list[Block] = [{"type": "text", "text": text}] if text else []
    blocks += [
        {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}
        for i, (name, args) in enumerate(calls)
    ]
    return Reply(blocks, "tool_use", Usage(10, 10), "fake-model")
