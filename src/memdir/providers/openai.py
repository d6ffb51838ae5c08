"""The ``openai`` provider, for any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, LM Studio,
DeepSeek, Qwen), through the official SDK (the only importer of it).

It converts Anthropic-format messages, tool schemas, tool calls and tool results to Chat
Completions and back, without losing any of them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import openai

from ..config import Config
from ..disk.layout import ENDPOINTS
from ..disk.statefile import StateFile
from ..errors import LLMError
from ..usage import UsageLog
from . import (
    Block,
    Message,
    RecordingModel,
    Reply,
    Request,
    SDKArguments,
    TextCallback,
    ToolInput,
    ToolSpec,
    Usage,
    connection_error,
    status_error,
)
from .jsonreply import extract_json

if TYPE_CHECKING:
    from openai.types.chat import (
        ChatCompletionAssistantMessageParam,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionMessageParam,
        ChatCompletionToolParam,
    )


def _about_format(message: str) -> bool:
    return any(w in message for w in ("response_format", "json_schema", "schema", "json_object"))


class _EndpointNotes:
    """What an endpoint was found not to support, kept in ``endpoints.json`` beside the usage
    log so that a new process does not repeat a failing request."""

    def __init__(self, usage_log: UsageLog | None, key: str) -> None:
        self.file = StateFile(usage_log.path.parent / ENDPOINTS, sync=False) if usage_log else None
        self.key = key

    def get(self, name: str, default: bool) -> bool:
        if self.file is None:
            return default
        notes = self.file.read().get(self.key, {})
        return bool(notes.get(name, default) if isinstance(notes, dict) else default)

    def set(self, name: str, value: bool) -> None:
        if self.file is None:
            return
        try:
            with self.file.changing() as data:
                data.setdefault(self.key, {})[name] = value
        except OSError:
            pass  # a read-only store: the next process asks once more


STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "end_turn",
}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def to_openai_messages(system: str, messages: list[Message]) -> list[ChatCompletionMessageParam]:
    """Anthropic-format messages as Chat Completions messages."""
    out: list[ChatCompletionMessageParam] = (
        [{"role": "system", "content": system}] if system else []
    )
    for msg in messages:
        content = msg["content"]
        if isinstance(content, str):
            if msg["role"] == "assistant":
                out.append({"role": "assistant", "content": content})
            else:
                out.append({"role": "user", "content": content})
            continue
        if msg["role"] == "assistant":
            text = _text_of(content)
            calls: list[ChatCompletionMessageFunctionToolCallParam] = [
                {
                    "id": b["id"],
                    "type": "function",
                    "function": {
                        "name": b["name"],
                        "arguments": json.dumps(b.get("input", {}), ensure_ascii=False),
                    },
                }
                for b in content
                if b.get("type") == "tool_use"
            ]
            item: ChatCompletionAssistantMessageParam = {
                "role": "assistant",
                "content": text or None,
            }
            if calls:
                item["tool_calls"] = calls
            out.append(item)
            continue
        # A user turn: tool results become tool messages (they must follow the assistant's
        # tool calls directly); any text goes after them as a user message.
        for b in content:
            if b.get("type") == "tool_result":
                result = b.get("content", "")
                text = result if isinstance(result, str) else _text_of(result)
                if b.get("is_error"):
                    text = f"[tool error] {text}"
                out.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": text})
        text = _text_of(content)
        if text:
            out.append({"role": "user", "content": text})
    return out


def to_openai_tools(tools: list[ToolSpec]) -> list[ChatCompletionToolParam]:
    """Anthropic tool schemas as Chat Completions function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t.get("input_schema", {"type": "object"}),
            },
        }
        for t in tools
    ]


def _tool_input(arguments: str | None) -> ToolInput:
    if not arguments:
        return {}
    try:  # (JSON as the API sends it, or what a small model's server passes on)
        value = extract_json(arguments)
    except ValueError:
        return {"_unparsed_arguments": arguments}
    return value if isinstance(value, dict) else {"value": value}


def from_openai(
    text: str | None, calls: list[tuple[str, str, str]], finish: str | None
) -> tuple[list[Block], str]:
    """Content blocks and stop reason from a completion's text and (id, name, args) calls."""
    blocks: list[Block] = [{"type": "text", "text": text}] if text else []
    for call_id, name, args in calls:
        blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": _tool_input(args)})
    stop = STOP_REASONS.get(finish or "stop", "end_turn")
    if calls and stop == "end_turn":
        stop = "tool_use"  # some servers say "stop" even when they called a tool
    return blocks, stop


class OpenAIModel(RecordingModel):
    """A model behind an OpenAI-compatible Chat Completions endpoint."""

    provider = "openai"

    def __init__(self, model: str, config: Config, usage_log: UsageLog | None) -> None:
        super().__init__(model, usage_log)
        self.base_url = config.base_url
        # Local servers (Ollama, vLLM) need no key, but the SDK insists on one.
        self.client = openai.OpenAI(
            api_key=config.api_key or "not-needed",
            base_url=config.base_url,
            timeout=config.timeout,
            max_retries=config.max_retries,
        )
        self.json_mode_supported = True
        # Structured output (a JSON schema): OpenAI, vLLM and llama.cpp enforce it; an endpoint
        # that refuses it once is remembered (per endpoint and model, next to the usage log).
        self._endpoints = _EndpointNotes(usage_log, f"{config.base_url or 'openai'}|{model}")
        self.schema_supported = self._endpoints.get("json_schema", True)
        # OpenAI's own API wants max_completion_tokens (reasoning models refuse max_tokens);
        # most compatible servers know only max_tokens. A 400 naming it switches.
        self.max_tokens_param = "max_tokens" if config.base_url else "max_completion_tokens"

    def _call(self, request: Request) -> Reply:
        kwargs: SDKArguments = {
            "model": self.model,
            self.max_tokens_param: request.max_tokens,
            "messages": to_openai_messages(request.system, request.messages),
        }
        if request.tools:
            kwargs["tools"] = to_openai_tools(request.tools)
        on_text = request.on_text
        if request.schema is not None and self.schema_supported:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": request.schema, "strict": False},
            }
        elif request.json_mode and self.json_mode_supported:
            kwargs["response_format"] = {"type": "json_object"}
        for _ in range(4):  # at most three adaptations to what the endpoint accepts
            try:
                return self._request(kwargs, on_text)
            except openai.BadRequestError as exc:
                message = str(exc.message)
                fmt = kwargs.get("response_format", {}).get("type")
                if fmt == "json_schema" and _about_format(message):
                    self.schema_supported = False  # no structured output: JSON mode instead
                    self._endpoints.set("json_schema", False)
                    kwargs["response_format"] = {"type": "json_object"}
                elif fmt == "json_object" and _about_format(message):
                    self.json_mode_supported = False  # an endpoint without JSON mode
                    del kwargs["response_format"]
                elif self.max_tokens_param in message and "max_" in message:
                    other = (
                        "max_tokens"
                        if self.max_tokens_param == "max_completion_tokens"
                        else "max_completion_tokens"
                    )
                    kwargs[other] = kwargs.pop(self.max_tokens_param)
                    self.max_tokens_param = other
                else:
                    raise status_error(
                        "openai", exc.status_code, message, "OPENAI_API_KEY"
                    ) from None
        raise LLMError("the openai endpoint refused every request variant — check the model")

    def _request(self, kwargs: SDKArguments, on_text: TextCallback | None) -> Reply:
        try:
            if on_text is None:
                return self._plain(kwargs)
            return self._streamed(kwargs, on_text)
        except openai.BadRequestError:
            raise
        except openai.APIStatusError as exc:
            raise status_error(
                "openai", exc.status_code, str(exc.message), "OPENAI_API_KEY"
            ) from None
        except openai.APIConnectionError as exc:
            raise connection_error("openai", self.base_url, "OPENAI_BASE_URL", exc) from None
        except (
            openai.APIError,
            ValueError,
            TypeError,
            KeyError,
            AttributeError,
            IndexError,
        ) as exc:
            raise LLMError(
                f"openai returned a malformed reply ({type(exc).__name__})"
                " — check OPENAI_BASE_URL points at a Chat Completions API"
            ) from None

    def _plain(self, kwargs: SDKArguments) -> Reply:
        completion = self.client.chat.completions.create(**kwargs)
        choice = completion.choices[0]
        calls = [
            (c.id, c.function.name, c.function.arguments)
            for c in (choice.message.tool_calls or [])
            if c.type == "function"
        ]
        blocks, stop = from_openai(choice.message.content, calls, choice.finish_reason)
        u = completion.usage
        usage = Usage(u.prompt_tokens, u.completion_tokens) if u else Usage()
        return Reply(blocks, stop, usage, completion.model or self.model)

    def _streamed(self, kwargs: SDKArguments, on_text: TextCallback) -> Reply:
        stream = self.client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        )
        text: list[str] = []
        calls: dict[int, list[str]] = {}
        finish = None
        usage = Usage()
        model = self.model
        for chunk in stream:
            model = chunk.model or model
            if chunk.usage:
                usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                    on_text(delta.content)
                for tc in delta.tool_calls or []:
                    slot = calls.setdefault(tc.index, ["", "", ""])
                    slot[0] = tc.id or slot[0]
                    if tc.function:
                        slot[1] = tc.function.name or slot[1]
                        slot[2] += tc.function.arguments or ""
                finish = choice.finish_reason or finish
        ordered = [(c[0], c[1], c[2]) for _, c in sorted(calls.items())]
        blocks, stop = from_openai("".join(text), ordered, finish)
        return Reply(blocks, stop, usage, model)
