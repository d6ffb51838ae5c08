"""The language-model layer: one small ``ChatModel`` protocol and helpers on top of it.

Messages and replies use the Anthropic Messages format (content blocks ``text`` and
``tool_use``; ``tool_result`` in user messages). Providers convert to and from their wire format.
SDKs are imported only in ``make_model``, so importing this package is cheap.
This package knows nothing of memories.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Required, TypedDict, TypeVar

from ..config import Config
from ..errors import LLMError, LLMUnavailable, ReplyFormatError
from ..usage import UsageLog
from .jsonreply import extract_json

T = TypeVar("T")
TextCallback = Callable[[str], None]
JSONSchema = dict[str, Any]  # a JSON Schema document: open by nature
ToolInput = dict[str, Any]  # a tool call's arguments: each tool has its own shape
SDKArguments = dict[str, Any]  # keyword arguments of an SDK's create(): the SDK's own shape


class Block(TypedDict, total=False):
    """One content block, as the Anthropic Messages format has them: ``text``; ``tool_use``
    (``id``, ``name``, ``input``) in an assistant message; ``tool_result`` (``tool_use_id``,
    ``content``, ``is_error``) in a user message."""

    type: Required[str]
    text: str
    id: str
    name: str
    input: ToolInput
    tool_use_id: str
    content: str | list[Block]
    is_error: bool


class Message(TypedDict):
    """One message of a conversation: a role and text or content blocks."""

    role: str
    content: str | list[Block]


class ToolSpec(TypedDict):
    """A tool offered to the model."""

    name: str
    description: str
    input_schema: JSONSchema


@dataclass(frozen=True)
class Usage:
    """Tokens one call consumed."""

    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class Reply:
    """A model's reply: content blocks, why it stopped, and what it cost."""

    content: list[Block]
    stop_reason: str = "end_turn"
    usage: Usage = field(default_factory=Usage)
    model: str = ""

    @property
    def text(self) -> str:
        """The text blocks joined."""
        return "".join(b.get("text", "") for b in self.content if b.get("type") == "text")

    @property
    def tool_uses(self) -> list[Block]:
        """The tool_use blocks, in order."""
        return [b for b in self.content if b.get("type") == "tool_use"]


@dataclass(frozen=True)
class Request:
    """One call's inputs, as a provider receives them."""

    system: str
    messages: list[Message]
    tools: list[ToolSpec] | None
    max_tokens: int
    json_mode: bool
    on_text: TextCallback | None
    schema: JSONSchema | None = None  # the JSON reply's shape, for structured output


class ChatModel(Protocol):
    """What every model (real or fake) offers."""

    provider: str
    model: str

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
        """One model call. ``on_text`` streams text as it arrives; ``schema`` asks for a JSON
        reply of that shape where the endpoint can enforce one."""
        ...


class RecordingModel:
    """Base of the SDK-backed models: times each call and writes it to the usage log."""

    provider = "base"

    def __init__(self, model: str, usage_log: UsageLog | None) -> None:
        self.model = model
        self.usage_log = usage_log

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
        """Call the provider and record purpose, tokens and latency, also on failure."""
        start = time.perf_counter()
        try:
            reply = self._call(
                Request(system, messages, tools, max_tokens, json_mode, on_text, schema)
            )
        except LLMError:
            self._record(purpose, Usage(), start, ok=False)
            raise
        self._record(purpose, reply.usage, start, ok=True)
        return reply

    def _record(self, purpose: str, usage: Usage, start: float, *, ok: bool) -> None:
        if self.usage_log is not None:
            self.usage_log.record(
                purpose=purpose,
                provider=self.provider,
                model=self.model,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                latency_ms=(time.perf_counter() - start) * 1000,
                ok=ok,
            )

    def _call(self, request: Request) -> Reply:
        raise NotImplementedError


def make_model(config: Config, *, memory: bool = False, usage_log: Path | None = None) -> ChatModel:
    """Build the configured model (the memory model if ``memory``); imports its SDK now."""
    provider = config.provider or "anthropic"
    name = config.memory_model_name if memory else config.chat_model
    log = UsageLog(usage_log) if usage_log else None
    if provider in ("claude-code", "codex"):
        from ..config import folder
        from .host_cli import HostCLIModel

        return HostCLIModel(
            provider,
            config.memory_model or config.model or "",
            log,
            timeout=max(config.timeout, 60.0),
            workspace=folder("cache") / "host-runs",
        )
    if provider == "anthropic":
        if not config.api_key:
            raise LLMUnavailable(
                "no Anthropic API key — set ANTHROPIC_API_KEY, or MEMDIR_PROVIDER=openai with"
                " OPENAI_BASE_URL for an OpenAI-compatible endpoint"
            )
        return _sdk("anthropic").AnthropicModel(name, config, log)  # type: ignore[no-any-return]
    if not config.api_key and not config.base_url:
        raise LLMUnavailable(
            "no OpenAI API key or endpoint — set OPENAI_API_KEY, or OPENAI_BASE_URL for a local"
            " server such as Ollama"
        )
    return _sdk("openai").OpenAIModel(name, config, log)  # type: ignore[no-any-return]


def _sdk(name: str) -> Any:
    """The adapter module of the provider ``name`` (``anthropic``, ``openai``); LLMUnavailable
    naming the extra to install when its SDK cannot be imported."""
    import importlib

    try:
        return importlib.import_module(f".{name}", __name__)
    except ImportError:
        raise LLMUnavailable(
            f"the {name} SDK is not installed — pip install 'memdir[{name}]'"
        ) from None


def runs_locally(model: ChatModel, config: Config) -> bool:
    """Whether ``model`` is an OpenAI-compatible server on this machine (Ollama, llama.cpp,
    LM Studio): usually a small model, which memdir helps with ``extract_style`` and
    ``select_guard`` set to "auto"."""
    from urllib.parse import urlsplit

    host = urlsplit(config.base_url or "").hostname or ""
    return model.provider == "openai" and host in ("localhost", "127.0.0.1", "::1")


def complete_text(
    model: ChatModel, *, system: str, messages: list[Message], purpose: str, max_tokens: int = 1024
) -> str:
    """One call, plain text out."""
    return model.complete(
        system=system, messages=messages, purpose=purpose, max_tokens=max_tokens
    ).text


def complete_json(
    model: ChatModel,
    *,
    system: str,
    messages: list[Message],
    purpose: str,
    validate: Callable[[Any], T],
    max_tokens: int = 2048,
    schema: JSONSchema | None = None,
) -> T:
    """One call whose reply must be JSON accepted by ``validate`` (which raises ValueError).

    A reply that does not parse or validate is answered once with the error (small local
    models often fix it); if the second reply fails too, ReplyFormatError is raised.
    """
    convo = list(messages)
    error = ""
    for attempt in range(2):
        reply = model.complete(
            system=system,
            messages=convo,
            purpose=purpose,
            max_tokens=max_tokens,
            json_mode=True,
            schema=schema,
        )
        try:
            return validate(extract_json(reply.text))
        except ValueError as exc:
            error = str(exc)
        if attempt == 0:
            convo = [
                *convo,
                {"role": "assistant", "content": reply.text or "(empty)"},
                {
                    "role": "user",
                    "content": f"Your reply could not be used: {error}. Reply again with only"
                    " the JSON object, no prose and no code fences.",
                },
            ]
    raise ReplyFormatError(f"the {purpose} model's reply was not usable JSON twice ({error})")


__all__ = [
    "ChatModel",
    "Message",
    "RecordingModel",
    "Reply",
    "Request",
    "Usage",
    "complete_json",
    "complete_text",
    "connection_error",
    "extract_json",
    "make_model",
    "status_error",
]


def status_error(provider: str, status: int, detail: str, key_var: str) -> LLMError:
    """The error for an HTTP error status the SDK gave up on (after its retries)."""
    detail = " ".join(detail.split())[:200]
    if status in (401, 403):
        return LLMUnavailable(
            f"the {provider} endpoint rejected the API key ({status}: {detail}) — set {key_var}"
            " to a valid key"
        )
    if status == 404:
        return LLMUnavailable(
            f"the {provider} endpoint does not know this model or path (404: {detail}) — check"
            " MEMDIR_MODEL / MEMDIR_MEMORY_MODEL and the base URL"
        )
    if status == 429:
        return LLMError(
            f"the {provider} endpoint is rate limiting (429) after retries — wait and"
            " retry, or raise MEMDIR_MAX_RETRIES"
        )
    if status >= 500:
        return LLMError(
            f"the {provider} endpoint failed ({status}: {detail}) after retries — retry later"
        )
    return LLMError(f"the {provider} endpoint refused the request ({status}: {detail})")


def connection_error(
    provider: str, base_url: str | None, url_var: str, exc: Exception
) -> LLMUnavailable:
    """The error for an endpoint that could not be reached or timed out."""
    where = base_url or "the default endpoint"
    kind = "timed out" if "timeout" in type(exc).__name__.lower() else "could not be reached"
    return LLMUnavailable(
        f"{provider} at {where} {kind} — check {url_var}, the network, or MEMDIR_TIMEOUT"
    )
