"""The ``anthropic`` provider, through the official SDK (the only importer of it).

Messages are already in the Anthropic format, so this module mostly passes them through,
streams text when asked, and maps SDK errors to memdir's.
"""

from __future__ import annotations

import anthropic

from ..config import Config
from ..errors import LLMError
from ..usage import UsageLog
from . import (
    Block,
    RecordingModel,
    Reply,
    Request,
    SDKArguments,
    Usage,
    connection_error,
    status_error,
)


class AnthropicModel(RecordingModel):
    """A Claude model behind the Messages API."""

    provider = "anthropic"

    def __init__(self, model: str, config: Config, usage_log: UsageLog | None) -> None:
        super().__init__(model, usage_log)
        self.base_url = config.base_url
        self.client = anthropic.Anthropic(
            api_key=config.api_key,
            base_url=config.base_url,
            timeout=config.timeout,
            max_retries=config.max_retries,
        )

    def _call(self, request: Request) -> Reply:
        kwargs: SDKArguments = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "messages": request.messages,
        }
        if request.system:
            kwargs["system"] = request.system
        if request.tools:
            kwargs["tools"] = request.tools
        on_text = request.on_text
        try:
            if on_text is None:
                message = self.client.messages.create(**kwargs)
            else:
                with self.client.messages.stream(**kwargs) as stream:
                    for text in stream.text_stream:
                        on_text(text)
                    message = stream.get_final_message()
        except anthropic.APIStatusError as exc:
            raise status_error(
                "anthropic", exc.status_code, str(exc.message), "ANTHROPIC_API_KEY"
            ) from None
        except anthropic.APIConnectionError as exc:
            raise connection_error("anthropic", self.base_url, "ANTHROPIC_BASE_URL", exc) from None
        except (anthropic.APIError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise LLMError(
                f"anthropic returned a malformed reply ({type(exc).__name__})"
                " — check ANTHROPIC_BASE_URL points at a Messages API"
            ) from None
        if not hasattr(message, "content") or not isinstance(message.content, list):
            raise LLMError(
                "anthropic returned a malformed reply (no content)"
                " — check ANTHROPIC_BASE_URL points at a Messages API"
            )
        blocks: list[Block] = []
        for block in message.content:
            if block.type == "text":
                blocks.append({"type": "text", "text": block.text})
            elif block.type == "tool_use":
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": block.id,
                        "name": block.name,
                        "input": dict(block.input) if block.input else {},
                    }
                )
        usage = Usage(message.usage.input_tokens or 0, message.usage.output_tokens or 0)
        return Reply(blocks, message.stop_reason or "end_turn", usage, message.model or self.model)
