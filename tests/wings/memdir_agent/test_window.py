"""The chat model's context window: from the setting, the user's own server, or the model's
family; unknown means nothing is refused."""

from __future__ import annotations

from memdir.config import Config
from memdir_agent.window import context_window

from fakeserver import FakeLLMServer


def test_the_setting_wins_then_the_server_then_the_family(llm_server: FakeLLMServer) -> None:
    """``context_tokens`` is taken as set; a vLLM-style server says ``max_model_len`` of the
    configured model; Claude and GPT models have known windows; anything else is unknown."""
    local = Config(provider="openai", base_url=llm_server.url + "/v1")
    assert context_window(local, "qwen") is None  # the server says nothing: nothing refused
    llm_server.gets["/v1/models"] = {
        "data": [{"id": "other", "max_model_len": 4096}, {"id": "qwen", "max_model_len": 32768}]
    }
    assert context_window(local, "qwen") == 32768
    assert (
        context_window(
            Config(provider="openai", base_url=local.base_url, context_tokens=2048), "qwen"
        )
        == 2048
    )
    assert context_window(Config(provider="anthropic"), "claude-sonnet-5-5") == 200_000
    assert context_window(Config(provider="openai"), "gpt-5.5") == 400_000
    assert context_window(Config(provider="openai"), "llama3.2") is None
