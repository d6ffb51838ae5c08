"""Both providers through their real SDKs against the fake wire-protocol server."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from memdir.config import Config
from memdir.errors import LLMError, LLMUnavailable, ReplyFormatError
from memdir.providers import ChatModel, complete_json, make_model
from memdir.usage import UsageLog
from memdir_testing import FakeModel

from conftest import CliFn
from fakeserver import FakeLLMServer, Scripted, error, reply

TOOLS = [
    {
        "name": "bash",
        "description": "Run a command",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    }
]
TOOL_TURN = [
    {"role": "user", "content": "list files"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Listing."},
            {"type": "tool_use", "id": "call_1", "name": "bash", "input": {"command": "ls"}},
        ],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "a.py\nb.py"}],
    },
]


def model_for(server: FakeLLMServer, provider: str, tmp_path: Path, **kw: Any) -> ChatModel:
    base = server.url if provider == "anthropic" else server.url + "/v1"
    config = Config(
        provider=provider,
        api_key="test-key",
        base_url=base,
        timeout=kw.pop("timeout", 5.0),
        max_retries=kw.pop("max_retries", 2),
        **kw,
    )
    return make_model(config, usage_log=tmp_path / "usage.jsonl")


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("stream", [False, True])
def test_text_round_trip(
    llm_server: FakeLLMServer, tmp_path: Path, provider: str, stream: bool
) -> None:
    """A text reply arrives whole (and in pieces when streamed) with usage and stop reason."""
    llm_server.queue(reply("Hello from the fake server", usage=(21, 6)))
    model = model_for(llm_server, provider, tmp_path)
    pieces: list[str] = []
    r = model.complete(
        system="Be brief.",
        messages=[{"role": "user", "content": "hi"}],
        purpose="agent",
        on_text=pieces.append if stream else None,
    )
    assert r.text == "Hello from the fake server" and r.stop_reason == "end_turn"
    assert (r.usage.input_tokens, r.usage.output_tokens) == (21, 6)
    if stream:
        assert len(pieces) > 1 and "".join(pieces) == r.text
    req = llm_server.requests[-1]
    assert req["path"] == ("/v1/messages" if provider == "anthropic" else "/v1/chat/completions")
    if provider == "anthropic":
        assert req["body"]["system"] == "Be brief."
        auth = req["headers"].get("x-api-key") or req["headers"]["authorization"]
        assert auth.endswith("test-key")
    else:
        assert req["body"]["messages"][0] == {"role": "system", "content": "Be brief."}
        assert req["headers"]["authorization"] == "Bearer test-key"


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("stream", [False, True])
def test_tool_use_round_trip(
    llm_server: FakeLLMServer, tmp_path: Path, provider: str, stream: bool
) -> None:
    """Tool schemas, tool calls and tool results convert both ways without loss."""
    llm_server.queue(reply("Reading.", ("call_2", "bash", {"command": "cat a.py", "n": [1, 2]})))
    model = model_for(llm_server, provider, tmp_path)
    r = model.complete(
        system="s", messages=TOOL_TURN, tools=TOOLS, on_text=(lambda _t: None) if stream else None
    )
    assert r.stop_reason == "tool_use"
    assert r.tool_uses == [
        {
            "type": "tool_use",
            "id": "call_2",
            "name": "bash",
            "input": {"command": "cat a.py", "n": [1, 2]},
        }
    ]
    assert r.text == "Reading."
    body = llm_server.requests[-1]["body"]
    if provider == "openai":
        assert body["tools"] == [
            {
                "type": "function",
                "function": {
                    "name": "bash",
                    "description": "Run a command",
                    "parameters": TOOLS[0]["input_schema"],
                },
            }
        ]
        assert body["messages"][2] == {
            "role": "assistant",
            "content": "Listing.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                }
            ],
        }
        assert body["messages"][3] == {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "a.py\nb.py",
        }
    else:
        assert body["tools"] == TOOLS and body["messages"] == TOOL_TURN


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_401_names_the_key_to_set(llm_server: FakeLLMServer, tmp_path: Path, provider: str) -> None:
    """A rejected key is LLMUnavailable naming the variable to set, and is not retried."""
    llm_server.queue(error(401, "invalid x-api-key"))
    with pytest.raises(LLMUnavailable, match=r"rejected the API key \(401") as exc:
        model_for(llm_server, provider, tmp_path).complete(
            system="", messages=[{"role": "user", "content": "hi"}]
        )
    assert f"{provider.upper()}_API_KEY" in str(exc.value)
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_429_is_retried_then_succeeds(
    llm_server: FakeLLMServer, tmp_path: Path, provider: str
) -> None:
    """Rate limiting is retried by the SDK and the call then succeeds."""
    llm_server.queue(error(429), reply("after retry"))
    r = model_for(llm_server, provider, tmp_path).complete(
        system="", messages=[{"role": "user", "content": "hi"}]
    )
    assert r.text == "after retry" and len(llm_server.requests) == 2


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_500_after_retries_is_llm_error(
    llm_server: FakeLLMServer, tmp_path: Path, provider: str
) -> None:
    """A server that keeps failing gives LLMError after max_retries + 1 attempts."""
    llm_server.queue(error(500), error(500), error(500))
    with pytest.raises(LLMError, match=r"failed \(500"):
        model_for(llm_server, provider, tmp_path).complete(
            system="", messages=[{"role": "user", "content": "hi"}]
        )
    assert len(llm_server.requests) == 3


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_timeout_is_reported(llm_server: FakeLLMServer, tmp_path: Path, provider: str) -> None:
    """A slow endpoint times out into LLMUnavailable naming MEMDIR_TIMEOUT."""
    llm_server.queue(Scripted(text="late", delay=1.5))
    with pytest.raises(LLMUnavailable, match=r"timed out.*MEMDIR_TIMEOUT"):
        model_for(llm_server, provider, tmp_path, timeout=0.3, max_retries=0).complete(
            system="", messages=[{"role": "user", "content": "hi"}]
        )


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_malformed_body_is_llm_error(
    llm_server: FakeLLMServer, tmp_path: Path, provider: str
) -> None:
    """A 200 whose body is not the protocol's JSON gives LLMError, not a crash."""
    llm_server.queue(Scripted(body=b'{"unexpected": true}'))
    with pytest.raises(LLMError, match="malformed reply"):
        model_for(llm_server, provider, tmp_path).complete(
            system="", messages=[{"role": "user", "content": "hi"}]
        )


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_unreachable_endpoint(tmp_path: Path, provider: str) -> None:
    """Nothing listening: one clear LLMUnavailable naming the URL variable."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = Config(
        provider=provider,
        api_key="k",
        base_url=f"http://127.0.0.1:{port}",
        max_retries=0,
        timeout=2,
    )
    with pytest.raises(
        LLMUnavailable, match=f"could not be reached — check {provider.upper()}_BASE_URL"
    ):
        make_model(config).complete(system="", messages=[{"role": "user", "content": "hi"}])


def test_missing_keys_name_what_to_set() -> None:
    """No key configured: LLMUnavailable says which variable to set."""
    with pytest.raises(LLMUnavailable, match="set ANTHROPIC_API_KEY"):
        make_model(Config(provider="anthropic"))
    with pytest.raises(LLMUnavailable, match="set OPENAI_API_KEY, or OPENAI_BASE_URL"):
        make_model(Config(provider="openai"))


def test_usage_is_logged_per_purpose(llm_server: FakeLLMServer, tmp_path: Path) -> None:
    """Every call records purpose, model and tokens; failures are logged too."""
    llm_server.queue(reply("a", usage=(100, 10)), reply("b", usage=(50, 5)), error(401))
    model = model_for(llm_server, "openai", tmp_path, memory_model="small-model")
    msgs = [{"role": "user", "content": "hi"}]
    model.complete(system="", messages=msgs, purpose="agent")
    model.complete(system="", messages=msgs, purpose="select")
    with pytest.raises(LLMUnavailable):
        model.complete(system="", messages=msgs, purpose="select")
    totals = {t.purpose: t for t in UsageLog(tmp_path / "usage.jsonl").totals()}
    assert (totals["agent"].input_tokens, totals["agent"].output_tokens) == (100, 10)
    assert (totals["select"].calls, totals["select"].failures) == (2, 1)


def test_memory_model_is_separate(llm_server: FakeLLMServer, tmp_path: Path) -> None:
    """The memory model setting is used for memory operations, the main model for the agent."""
    llm_server.queue(reply("x"), reply("y"))
    config = Config(
        provider="anthropic",
        api_key="k",
        base_url=llm_server.url,
        model="big",
        memory_model="small",
    )
    make_model(config).complete(system="", messages=[{"role": "user", "content": "a"}])
    make_model(config, memory=True).complete(system="", messages=[{"role": "user", "content": "b"}])
    assert [r["body"]["model"] for r in llm_server.requests] == ["big", "small"]


def test_openai_json_mode_requested_and_dropped_when_unsupported(
    llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    """JSON mode is asked for; an endpoint that rejects it is asked again without it."""
    llm_server.queue(
        error(400, "response_format json_object is not supported"), reply('{"selected": ["a"]}')
    )
    model = model_for(llm_server, "openai", tmp_path)
    out = complete_json(
        model,
        system="",
        messages=[{"role": "user", "content": "pick"}],
        purpose="select",
        validate=lambda v: v["selected"],
    )
    assert out == ["a"]
    assert llm_server.requests[0]["body"]["response_format"] == {"type": "json_object"}
    assert "response_format" not in llm_server.requests[1]["body"]


def test_complete_json_asks_again_with_the_error(llm_server: FakeLLMServer, tmp_path: Path) -> None:
    """An unparseable reply gets one more request carrying the parse error."""
    llm_server.queue(
        reply("I think the answer is memory a."), reply('```json\n{"selected": ["a",]}\n```')
    )
    model = model_for(llm_server, "anthropic", tmp_path)
    out = complete_json(
        model,
        system="",
        messages=[{"role": "user", "content": "pick"}],
        purpose="select",
        validate=lambda v: v["selected"],
    )
    assert out == ["a"]
    retry = llm_server.requests[1]["body"]["messages"]
    assert retry[-1]["role"] == "user" and "could not be used" in retry[-1]["content"]


def test_complete_json_gives_typed_error_after_two_failures() -> None:
    """Two bad replies raise ReplyFormatError: never a silently empty result."""
    model = FakeModel(["no json here", "still none"])
    with pytest.raises(ReplyFormatError, match="not usable JSON twice"):
        complete_json(
            model,
            system="",
            messages=[{"role": "user", "content": "x"}],
            purpose="extract",
            validate=lambda v: v,
        )
    assert len(model.calls) == 2


def test_fake_model_records_and_scripts() -> None:
    """FakeModel returns scripted replies in order, JSON for dicts, and raises exceptions."""
    model = FakeModel([{"a": 1}, "text", LLMError("boom")])
    msgs = [{"role": "user", "content": "x"}]
    assert json.loads(model.complete(system="s", messages=msgs).text) == {"a": 1}
    assert model.complete(system="s", messages=msgs, purpose="select").text == "text"
    with pytest.raises(LLMError, match="boom"):
        model.complete(system="s", messages=msgs)
    with pytest.raises(LLMError, match="no scripted reply left"):
        model.complete(system="s", messages=msgs)
    assert [c["purpose"] for c in model.calls] == ["agent", "select", "agent", "agent"]


def test_llm_check_cli(llm_server: FakeLLMServer, cli: CliFn) -> None:
    """`memdir llm check` prints provider, model, latency and tokens; stats sums usage."""
    llm_server.queue(reply("ok", usage=(9, 1)))
    env = {
        "ANTHROPIC_API_KEY": "k",
        "ANTHROPIC_BASE_URL": llm_server.url,
        "MEMDIR_MODEL": "claude-test",
    }
    r = cli("llm", "check", env=env)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == "provider: anthropic" and lines[1] == "model: claude-test"
    assert lines[2].startswith("latency: ") and lines[3] == "tokens: 9 in, 1 out"
    stats = json.loads(cli("llm", "stats", "--json").out)
    assert stats[0]["purpose"] == "check" and stats[0]["input_tokens"] == 9


def test_llm_check_without_configuration_is_one_line(cli: CliFn) -> None:
    """No key, no endpoint: exit 1 and one line naming what to set, no traceback."""
    r = cli("llm", "check")
    assert r.code == 1
    assert r.err == (
        "memdir: error: no Anthropic API key — set ANTHROPIC_API_KEY, or"
        " MEMDIR_PROVIDER=openai with OPENAI_BASE_URL for an OpenAI-compatible"
        " endpoint\n"
    )


def test_openai_provider_selected_by_env(llm_server: FakeLLMServer, cli: CliFn) -> None:
    """MEMDIR_PROVIDER=openai with OPENAI_BASE_URL works without a key (local servers)."""
    llm_server.queue(reply("ok"))
    r = cli(
        "llm",
        "check",
        "--memory",
        "--json",
        env={
            "MEMDIR_PROVIDER": "openai",
            "OPENAI_BASE_URL": llm_server.url + "/v1",
            "MEMDIR_MODEL": "llama3.2",
        },
    )
    assert r.code == 0, r.err
    assert json.loads(r.out)["model"] == "llama3.2"
    assert llm_server.requests[0]["path"] == "/v1/chat/completions"


def test_timeout_and_retry_flags(llm_server: FakeLLMServer, cli: CliFn) -> None:
    """--max-retries and --timeout reach the SDK: no retry, and a short timeout."""
    llm_server.queue(error(500), reply("unused"))
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": llm_server.url}
    r = cli("--max-retries", "0", "llm", "check", env=env)
    assert r.code == 1 and "failed (500" in r.err and len(llm_server.requests) == 1
    llm_server.script.clear()
    llm_server.queue(Scripted(text="late", delay=1.5))
    r = cli("--timeout", "0.3", "--max-retries", "0", "llm", "check", env=env)
    assert r.code == 1 and "timed out" in r.err


def test_structured_output_with_fallback_remembered(
    llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    """A JSON schema is sent where the endpoint takes it; an endpoint that refuses it gets JSON
    mode instead, and the refusal is remembered beside the usage log (no repeated failures)."""
    from memdir.recall import SELECT_SCHEMA

    refused: list[str] = []

    def handler(req: dict[str, Any]) -> Scripted:
        fmt = req["body"].get("response_format", {}).get("type")
        if fmt == "json_schema":
            refused.append(fmt)
            return error(400, "response_format json_schema is not supported by this model")
        return reply('{"selected": ["a"]}')

    llm_server.handler = handler
    cfg = Config(provider="openai", api_key="k", base_url=llm_server.url + "/v1", max_retries=0)
    usage = tmp_path / "usage.jsonl"
    for _ in range(2):  # two processes' worth of models
        model = make_model(cfg, memory=True, usage_log=usage)
        out = complete_json(
            model,
            system="s",
            messages=[{"role": "user", "content": "x"}],
            purpose="select",
            validate=lambda v: v,
            schema=SELECT_SCHEMA,
        )
        assert out == {"selected": ["a"]}
    assert refused == ["json_schema"]  # asked once, then remembered
    formats = [r["body"].get("response_format", {}).get("type") for r in llm_server.requests]
    assert formats == ["json_schema", "json_object", "json_object"]
    sent = llm_server.requests[0]["body"]["response_format"]["json_schema"]["schema"]
    assert sent == SELECT_SCHEMA


def test_structured_output_accepted(llm_server: FakeLLMServer) -> None:
    """An endpoint that takes a schema gets it on every call."""
    llm_server.handler = lambda req: reply('{"selected": []}')
    cfg = Config(provider="openai", api_key="k", base_url=llm_server.url + "/v1", max_retries=0)
    model = make_model(cfg, memory=True)
    for _ in range(2):
        complete_json(
            model,
            system="s",
            messages=[{"role": "user", "content": "x"}],
            purpose="select",
            validate=lambda v: v,
            schema={"type": "object"},
        )
    assert [r["body"]["response_format"]["type"] for r in llm_server.requests] == [
        "json_schema",
        "json_schema",
    ]
