"""``embedder = "http"``: any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Ollama,
vLLM, llama.cpp), over the standard library's HTTP client, so no SDK is imported.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from memdir.config import Config
from memdir.errors import ConfigError
from memdir.find.embed import Embedder, EmbedError, normalise

if TYPE_CHECKING:
    from memdir.find.embed import Vectors


class HttpEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint."""

    min_similarity = 0.3
    multilingual = True  # the user chose the model; most served embedders are multilingual

    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, timeout: float = 30.0
    ) -> None:
        from urllib.parse import urlsplit

        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.name = f"{model}@{urlsplit(base_url).netloc}"
        self.dim = 0  # learned from the first reply

    def embed(self, texts: Sequence[str], batch: int = 64) -> Vectors:
        import numpy as np

        rows: list[list[float]] = []
        for start in range(0, len(texts), batch):
            rows.extend(self._post(list(texts[start : start + batch])))
        if not rows:
            return np.zeros((0, self.dim or 1), dtype=np.float32)
        width = {len(r) for r in rows}
        if len(width) != 1 or (self.dim and width != {self.dim}):
            raise EmbedError(f"{self.url} returned vectors of lengths {sorted(width)}")
        self.dim = width.pop()
        return normalise(np.array(rows, dtype=np.float32))

    def _post(self, texts: list[str]) -> list[list[float]]:
        import urllib.error
        import urllib.request

        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        body = json.dumps({"model": self.model, "input": texts}).encode()
        request = urllib.request.Request(self.url, body, headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                reply: Any = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise EmbedError(f"{self.url} answered {exc.code} {exc.reason}") from None
        except (OSError, ValueError) as exc:
            raise EmbedError(f"{self.url} failed: {exc}") from None
        try:
            data = sorted(reply["data"], key=lambda d: d["index"])
            rows = [[float(x) for x in d["embedding"]] for d in data]
        except (KeyError, TypeError, ValueError):
            raise EmbedError(f"{self.url} returned no embeddings") from None
        if len(rows) != len(texts) or any(not all(map(math.isfinite, r)) for r in rows):
            raise EmbedError(f"{self.url} returned {len(rows)} vectors for {len(texts)} texts")
        return rows


def chosen(config: Config) -> tuple[tuple[Any, ...], Callable[[], Embedder]]:
    """``embedder = "http"``: its identity and how to make it (``memdir.embedders``)."""
    url = config.embed_url or config.base_url
    if not url or not config.embed_model:
        raise ConfigError(
            "embedder = 'http' needs embed_url (or base_url) and embed_model in config.toml"
        )
    model, key = config.embed_model, config.embed_api_key
    return ("http", url, model, key, config.timeout), lambda: HttpEmbedder(
        url, model, key, config.timeout
    )
