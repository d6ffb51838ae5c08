"""A fake LLM server on 127.0.0.1 speaking the Anthropic Messages and OpenAI Chat Completions
wire protocols (plain and streaming), serving scripted replies and recording requests. It also
answers OpenAI ``/embeddings`` requests with the vectors of ``embed_text`` (set by a test).

The real SDKs talk to it over HTTP, so provider code runs exactly as it would in production.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Scripted:
    """One scripted answer: a reply (text and tool calls), an error status, or a raw body."""

    text: str = ""
    tool_uses: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    stop: str | None = None
    usage: tuple[int, int] = (12, 7)
    status: int = 200
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def reply(text: str = "", *tool_uses: tuple[str, str, dict[str, Any]], **kw: Any) -> Scripted:
    """A successful reply; tool uses are (id, name, input)."""
    return Scripted(text=text, tool_uses=list(tool_uses), **kw)


def error(status: int, message: str = "scripted error", **kw: Any) -> Scripted:
    """An HTTP error with a JSON error body both SDKs understand."""
    body = json.dumps(
        {
            "type": "error",
            "error": {"type": "api_error", "message": message},
        }
    ).encode()
    headers = {"retry-after-ms": "1", "retry-after": "0", **kw.pop("headers", {})}
    return Scripted(status=status, body=body, headers=headers, **kw)


Handler = Callable[[dict[str, Any]], Scripted]


class FakeLLMServer:
    """Serve scripted replies; ``requests`` records every request as {path, headers, body}."""

    def __init__(self) -> None:
        self.script: list[Scripted] = []
        self.handler: Handler | None = None
        self.embed_text: Callable[[str], list[float]] | None = None
        self.requests: list[dict[str, Any]] = []
        self.gets: dict[str, Any] = {}  # GET path -> the JSON it answers (e.g. llama.cpp's /props)
        self.got: list[str] = []  # the GET paths asked for, in order
        self.lock = threading.Lock()
        server = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                with server.lock:
                    server.got.append(self.path)
                    found = server.gets.get(self.path)
                if found is None:
                    server._send(self, 404, b'{"error": "not found"}', "application/json", {})
                else:
                    server._send(self, 200, json.dumps(found).encode(), "application/json", {})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"_raw": raw.decode(errors="replace")}
                req = {
                    "path": self.path,
                    "body": body,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                }
                with server.lock:
                    server.requests.append(req)
                    item = server._next(req)
                server._respond(self, req, item)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self.httpd.daemon_threads = True
        # a short poll: shutdown() waits for the loop to look up, once per test
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        """Base URL (for ANTHROPIC_BASE_URL; add /v1 for OPENAI_BASE_URL)."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> FakeLLMServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def queue(self, *items: Scripted) -> None:
        with self.lock:
            self.script.extend(items)

    def _next(self, req: dict[str, Any]) -> Scripted:
        if req["path"].endswith("/embeddings") and self.embed_text is not None:
            return Scripted()
        if self.script:
            return self.script.pop(0)
        if self.handler is not None:
            return self.handler(req)
        return error(500, "the fake server has no scripted reply left")

    # -- rendering -------------------------------------------------------------------------

    def _respond(self, h: BaseHTTPRequestHandler, req: dict[str, Any], item: Scripted) -> None:
        if item.delay:
            time.sleep(item.delay)
        try:
            if item.body is not None or item.status != 200:
                self._send(h, item.status, item.body or b"{}", "application/json", item.headers)
                return
            if req["path"].endswith("/embeddings") and self.embed_text is not None:
                texts = req["body"]["input"]
                data = [
                    {"object": "embedding", "index": i, "embedding": self.embed_text(t)}
                    for i, t in enumerate([texts] if isinstance(texts, str) else texts)
                ]
                self._send(
                    h,
                    200,
                    json.dumps(
                        {
                            "object": "list",
                            "data": data,
                            "model": req["body"].get("model"),
                            "usage": {"prompt_tokens": 1, "total_tokens": 1},
                        }
                    ).encode(),
                )
                return
            openai = req["path"].endswith("/chat/completions")
            stream = bool(req["body"].get("stream"))
            model = req["body"].get("model", "fake")
            if openai:
                if stream:
                    self._send_sse(h, _openai_chunks(item, model), openai=True)
                else:
                    self._send(h, 200, json.dumps(_openai_body(item, model)).encode())
            elif stream:
                self._send_sse(h, _anthropic_events(item, model), openai=False)
            else:
                self._send(h, 200, json.dumps(_anthropic_body(item, model)).encode())
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    @staticmethod
    def _send(
        h: BaseHTTPRequestHandler,
        status: int,
        data: bytes,
        ctype: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        h.send_response(status)
        h.send_header("content-type", ctype)
        h.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    @staticmethod
    def _send_sse(
        h: BaseHTTPRequestHandler, events: list[tuple[str | None, Any]], *, openai: bool
    ) -> None:
        parts = []
        for name, data in events:
            payload = data if isinstance(data, str) else json.dumps(data)
            parts.append((f"event: {name}\n" if name else "") + f"data: {payload}\n\n")
        body = "".join(parts).encode()
        FakeLLMServer._send(h, 200, body, "text/event-stream")


def _stop(item: Scripted) -> str:
    return item.stop or ("tool_use" if item.tool_uses else "end_turn")


def _anthropic_blocks(item: Scripted) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": item.text}] if item.text else []
    blocks += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in item.tool_uses]
    return blocks


def _anthropic_body(item: Scripted, model: str) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _anthropic_blocks(item),
        "stop_reason": _stop(item),
        "stop_sequence": None,
        "usage": {"input_tokens": item.usage[0], "output_tokens": item.usage[1]},
    }


def _anthropic_events(item: Scripted, model: str) -> list[tuple[str | None, Any]]:
    start = _anthropic_body(item, model)
    start.update(
        content=[], stop_reason=None, usage={"input_tokens": item.usage[0], "output_tokens": 1}
    )
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for i, block in enumerate(_anthropic_blocks(item)):
        if block["type"] == "text":
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            text = block["text"]
            for j in range(0, len(text), 5):
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "text_delta", "text": text[j : j + 5]},
                        },
                    )
                )
        else:
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {
                            "type": "tool_use",
                            "id": block["id"],
                            "name": block["name"],
                            "input": {},
                        },
                    },
                )
            )
            args = json.dumps(block["input"])
            for j in range(0, len(args), 7):
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": args[j : j + 7]},
                        },
                    )
                )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": _stop(item), "stop_sequence": None},
                "usage": {"output_tokens": item.usage[1]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def _openai_calls(item: Scripted) -> list[dict[str, Any]]:
    return [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, n, a in item.tool_uses
    ]


def _openai_body(item: Scripted, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": item.text or None}
    if item.tool_uses:
        message["tool_calls"] = _openai_calls(item)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _FINISH[_stop(item)]}],
        "usage": {
            "prompt_tokens": item.usage[0],
            "completion_tokens": item.usage[1],
            "total_tokens": sum(item.usage),
        },
    }


def _openai_chunks(item: Scripted, model: str) -> list[tuple[str | None, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, Any]:
        return (
            None,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            },
        )

    out: list[tuple[str | None, Any]] = [chunk({"role": "assistant", "content": ""})]
    for j in range(0, len(item.text), 5):
        out.append(chunk({"content": item.text[j : j + 5]}))
    for k, call in enumerate(_openai_calls(item)):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": k,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
        )
        args = call["function"]["arguments"]
        for j in range(0, len(args), 7):
            out.append(
                chunk({"tool_calls": [{"index": k, "function": {"arguments": args[j : j + 7]}}]})
            )
    out.append(chunk({}, _FINISH[_stop(item)]))
    out.append(
        (
            None,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [],
                "usage": {
                    "prompt_tokens": item.usage[0],
                    "completion_tokens": item.usage[1],
                    "total_tokens": sum(item.usage),
                },
            },
        )
    )
    out.append((None, "[DONE]"))
    return out


# -- the README session, runnable ---------------------------------------------------------------

README_TABS = {
    "action": "create",
    "name": "prefer-tabs",
    "type": "user_preference",
    "description": "User prefers tabs over spaces for indentation",
    "body": "Indent with tabs, not spaces.",
}


def readme_handler(req: dict[str, Any]) -> Scripted:
    """The replies behind the README's console session."""
    body = json.dumps(req["body"], ensure_ascii=False)
    system = json.dumps(req["body"].get("system", ""))
    if "You extract memories" in system or "You extract memories" in body[:2000]:
        wanted = "I prefer tabs over spaces" in body and "Reformat" not in body
        return reply(json.dumps({"memories": [README_TABS] if wanted else []}))
    if "You select relevant memories" in system or "select relevant" in body[:2000]:
        return reply(json.dumps({"selected": ["prefer-tabs"] if "prefer-tabs" in body else []}))
    last = json.dumps(req["body"]["messages"][-1], ensure_ascii=False)
    if "Reformat main.py" in last:
        return reply("Done: main.py now uses tabs for indentation.")
    return reply("Noted — I'll indent with tabs from now on.")


def main() -> None:
    """Serve the README session's replies until Ctrl-C (python tests/fakeserver.py)."""
    server = FakeLLMServer()
    server.handler = readme_handler
    server.start()
    print(f"export ANTHROPIC_BASE_URL={server.url} ANTHROPIC_API_KEY=fake", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
