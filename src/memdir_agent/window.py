"""How many tokens the chat model takes at once (its context window), so that a message too
long for it is refused before it is sent rather than by the endpoint after a long wait.

From, in order: the ``context_tokens`` setting; an OpenAI-compatible server on ``base_url``
that says it (llama.cpp's ``/props``; ``/v1/models`` with vLLM's ``max_model_len``, llama.cpp's
``n_ctx_train`` or LM Studio's ``max_context_length``); the known model families. None: not
known, nothing is checked.
This module knows nothing of memories.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from memdir.config import Config

PROBE_TIMEOUT = 2.0
# The smallest window of each family's current models (a lower bound never refuses a fit).
FAMILIES = (("claude-", 200_000), ("gpt-4.1", 1_000_000), ("gpt-5", 400_000), ("gpt-4o", 128_000))


def context_window(config: Config, model: str) -> int | None:
    """The context window of ``model`` as configured, in tokens; None when not known."""
    if config.context_tokens:
        return config.context_tokens
    if config.base_url and config.provider == "openai":
        found = _ask_server(config.base_url, model)
        if found:
            return found
    if config.base_url and not model.startswith(("claude-", "gpt-")):
        return None  # a server of the user's: its model is not one of the families
    for prefix, tokens in FAMILIES:
        if model.startswith(prefix):
            return tokens
    return None


def _get(url: str) -> dict[str, Any]:
    """The JSON object the server answers at ``url``; {} when it answers none."""
    request = urllib.request.Request(url, headers={"accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT) as reply:
            got = json.loads(reply.read(1 << 20))
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def _ask_server(base_url: str, model: str) -> int | None:
    """What an OpenAI-compatible server says of its context; None when it says nothing."""
    parts = urlsplit(base_url.rstrip("/"))
    root = parts.path[: -len("/v1")] if parts.path.endswith("/v1") else parts.path
    # llama.cpp: the window the server was started with
    settings = _get(urlunsplit(parts._replace(path=root + "/props"))).get(
        "default_generation_settings"
    )
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    if isinstance(n_ctx, int) and n_ctx > 0:
        return n_ctx
    data = _get(urlunsplit(parts._replace(path=parts.path + "/models"))).get("data")
    rows = [r for r in data if isinstance(r, dict)] if isinstance(data, list) else []
    rows.sort(key=lambda r: r.get("id") != model)  # the configured model first
    for row in rows:
        meta = row["meta"] if isinstance(row.get("meta"), dict) else {}
        for value in (
            row.get("max_model_len"),
            row.get("max_context_length"),
            meta.get("n_ctx_train"),
        ):
            if isinstance(value, int) and value > 0:
                return value
    return None
