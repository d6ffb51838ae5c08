"""Hybrid search: the MiniLM embedder, the vectors cache, fusion with BM25, and every way dense
ranking can be unavailable (the other embedders are ``memdir_embedders``')."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memdir import MemoryStore
from memdir.config import Config, load_config
from memdir.disk.layout import state_dir
from memdir.errors import ConfigError
from memdir.find.embed import MiniLM, from_config

from conftest import CliFn, trust
from fakeserver import FakeLLMServer

PARAPHRASES = [  # (name, description, body, a question sharing no word with it)
    (
        "staging-database",
        "Staging runs PostgreSQL 16",
        "The staging environment uses PostgreSQL 16 on host pg1.",
        "which DB version is on the preproduction server?",
    ),
    (
        "indentation",
        "User prefers tabs over spaces for indenting code",
        "Use tabs, never spaces.",
        "how should I format whitespace at line starts?",
    ),
    (
        "answer-language",
        "Answer the user in Chinese",
        "The user wants replies in Chinese.",
        "should you speak Mandarin to me?",
    ),
    (
        "test-runner",
        "Run the tests with pytest",
        "Use pytest, never unittest.",
        "favourite pizza topping",
    ),  # nothing asks about this one
]


@pytest.fixture(scope="module")
def minilm() -> MiniLM:
    return MiniLM()


def words(text: str) -> list[str]:
    return [w.strip("?.,!").lower() for w in text.split()]


class CountingEmbedder:
    """Bag-of-words vectors (deterministic, fast); records every text it embeds."""

    name = "counting-bow"
    dim = 64
    min_similarity = 0.3
    multilingual = True

    def __init__(self) -> None:
        self.seen: list[str] = []

    @property
    def memories(self) -> list[str]:
        """The memory texts embedded ("name: description…"), not the queries."""
        return [t for t in self.seen if ": " in t]

    def embed(self, texts: Sequence[str]) -> Any:
        self.seen.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in words(t):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-9)


def fill(store: MemoryStore, items: list[tuple[str, str, str, str]] = PARAPHRASES) -> None:
    for name, desc, body, _ in items:
        store.write(name, type="project_fact", description=desc, body=body)


def test_minilm_vectors_are_unit_length_and_close_for_paraphrases(minilm: MiniLM) -> None:
    """MiniLM vectors are unit length and close for paraphrases."""
    docs = minilm.embed([PARAPHRASES[0][2], "I like pizza with mushrooms."])
    query = minilm.embed([PARAPHRASES[0][3]])[0]
    assert docs.shape == (2, 384) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    assert docs[0] @ query > 0.35 > docs[1] @ query
    # the order of a batch does not change a text's vector
    again = minilm.embed(["I like pizza with mushrooms.", PARAPHRASES[0][2]])
    assert np.allclose(again[1], docs[0], atol=1e-4)


def test_hybrid_finds_memories_that_share_no_word_with_the_question(tmp_path: Path) -> None:
    """Hybrid finds memories that share no word with the question."""
    store = MemoryStore(tmp_path / ".memory")
    fill(store)
    for name, _, _, question in PARAPHRASES[:3]:
        assert store.search(question, 5, dense=False) == [], "BM25 should find nothing"
        hits = store.search(question, 3)
        assert hits and hits[0].memory.name == name
    assert store.search("favourite pizza topping", 5) == []  # unrelated: no hit at all
    assert "hybrid" in store.index.describe()
    assert _vector_rows(state_dir(tmp_path / ".memory") / "index.sqlite") > 0


def test_exact_names_still_win_through_bm25(tmp_path: Path) -> None:
    """Exact names still win through BM25."""
    store = MemoryStore(tmp_path / ".memory")
    fill(store)
    store.write(
        "deploy-steps",
        type="project_fact",
        description="How releases go out",
        body="Run make release-xk7 from the main branch.",
    )
    top = store.search("release-xk7", 3)
    assert top[0].entry.file == "deploy-steps.md" and top[0].bm25_rank == 1


def test_embedder_none_is_bm25_alone_and_writes_no_vectors(tmp_path: Path) -> None:
    """embedder = "none" ranks by BM25 alone and writes no vectors."""
    root = tmp_path / ".memory"
    store = MemoryStore(root, Config(dir=root, embedder="none"))
    fill(store)
    assert store.search(PARAPHRASES[0][3], 5) == []
    assert store.search("PostgreSQL", 5)[0].memory.name == "staging-database"
    assert _vector_rows(state_dir(root) / "index.sqlite") == 0
    assert "BM25 alone" in store.index.describe()


WITHOUT = """
import sys
for name in {hidden!r}:
    sys.modules[name] = None  # as Python's import system sees a package that is not installed
"""


def _without(hidden: Sequence[str], script: str, tmp_path: Path) -> str:
    """Run ``script`` in a fresh interpreter where the ``hidden`` packages are not installed;
    its stdout."""
    import subprocess
    import sys

    from conftest import child_env

    r = subprocess.run(
        [sys.executable, "-c", WITHOUT.format(hidden=list(hidden)) + script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=child_env(),
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.slow
def test_without_the_extra_auto_means_bm25(tmp_path: Path) -> None:
    """Without memdir[embed], embedder = "auto" means BM25 alone; asking for minilm says
    which extra to install."""
    script = f"""
from pathlib import Path
from memdir import MemoryStore
from memdir.config import Config
from memdir.find.embed import from_config
from memdir.errors import ConfigError
print(from_config(Config()))
try:
    from_config(Config(embedder="minilm"))
except ConfigError as exc:
    print("error:", exc)
store = MemoryStore(Path({str(tmp_path / ".memory")!r}))
for name, description, body, _ in {PARAPHRASES!r}:
    store.write(name, type="project_fact", description=description, body=body)
print(store.search("pytest", 5)[0].memory.name)
print(store.index.describe())
"""
    lines = _without(["onnxruntime"], script, tmp_path).splitlines()
    assert lines[0] == "None"
    assert lines[1].startswith("error:") and "memdir[embed]" in lines[1]
    assert lines[2] == "test-runner"
    assert "install memdir[embed]" in lines[3]


def test_vectors_are_keyed_by_content_and_follow_every_change(tmp_path: Path) -> None:
    """Vectors are keyed by content and follow every change."""
    emb = CountingEmbedder()
    root = tmp_path / ".memory"
    store = MemoryStore(root, embedder=emb)
    fill(store)
    store.search("anything", 1)
    assert len(emb.memories) == 4
    store.write(
        "staging-database",
        type="project_fact",
        description="Staging runs MySQL 8",
        body="Moved off Postgres.",
    )
    assert store.search("mysql moved", 1)[0].memory.name == "staging-database"
    assert len(emb.memories) == 5  # only the changed memory
    store.delete("test-runner")
    assert all(r.entry.file != "test-runner.md" for r in store.search("pytest unittest", 5))
    # a restored version has a vector already: nothing is embedded again
    store.restore("staging-database", 1)
    store.search("postgresql", 1)
    assert len(emb.memories) == 5
    # a hand edit (no memdir write) is seen too
    path = root / "indentation.md"
    path.write_text(path.read_text().replace("never spaces", "never spaces, zebra"))
    store.refresh()
    assert store.search("zebra", 1)[0].memory.name == "indentation"
    assert len(emb.memories) == 6
    # a new process reuses the file: nothing to embed
    emb2 = CountingEmbedder()
    MemoryStore(root, embedder=emb2).search("postgresql", 1)
    assert emb2.memories == []


def test_vectors_from_another_model_are_rebuilt(tmp_path: Path) -> None:
    """Vectors from another model are rebuilt."""
    root = tmp_path / ".memory"
    fill(MemoryStore(root, embedder=CountingEmbedder()))
    MemoryStore(root, embedder=CountingEmbedder()).search("x", 1)
    other = CountingEmbedder()
    other.name = "another-model"
    MemoryStore(root, embedder=other).search("postgresql", 1)
    assert len(other.memories) == 4
    db = sqlite3.connect(state_dir(root) / "index.sqlite")
    model = db.execute("SELECT value FROM meta WHERE key = 'vectors'").fetchone()[0]
    assert model.endswith("/another-model/64")
    rows = db.execute("SELECT vec FROM vecs").fetchall()
    assert len(rows) == 4 and all(len(v) == 64 * 2 for (v,) in rows)  # float16


def test_a_damaged_vectors_file_is_rebuilt(tmp_path: Path) -> None:
    """A damaged vectors file is rebuilt."""
    root = tmp_path / ".memory"
    fill(MemoryStore(root, embedder=CountingEmbedder()))
    (state_dir(root) / "index.sqlite").write_bytes(b"not a database" * 100)
    emb = CountingEmbedder()
    assert MemoryStore(root, embedder=emb).search("postgresql", 1)
    assert len(emb.memories) == 4


def test_a_time_budget_embeds_the_rest_on_later_searches(tmp_path: Path) -> None:
    """A search with no time to spare embeds nothing and answers by BM25; one with a budget
    embeds what fits (small chunks, the clock looked at before each); none left after."""
    emb = CountingEmbedder()
    store = MemoryStore(tmp_path / ".memory", embedder=emb)
    fill(store)
    store.index.pace(budget=0.0)
    assert store.search("postgresql", 1)[0].memory.name == "staging-database"  # BM25
    assert emb.memories == []  # the query alone: no document on the caller's time
    store.index.pace(budget=60.0)
    store.search("postgresql", 1)
    assert len(emb.memories) == 4
    store.index.pace(budget=None)
    seen = len(emb.memories)
    store.search("postgresql", 1)
    assert len(emb.memories) == seen


def test_progress_is_reported_per_chunk(tmp_path: Path) -> None:
    """A watched run reports after every chunk it read and embedded (so it can be stopped
    between two)."""
    calls: list[tuple[int, int]] = []
    root = tmp_path / ".memory"
    with MemoryStore(root, Config(dir=root, embedder="none")) as plain:
        for i in range(40):
            plain.write(f"fact-{i}", type="project_fact", description=f"Fact {i}", body=str(i))
    store = MemoryStore(root, embedder=CountingEmbedder())
    store.index.pace(progress=lambda done, total: calls.append((done, total)))
    store.search("x", 1)
    assert calls == [(16, 40), (32, 40), (40, 40)]


def test_chinese_queries_use_bm25_when_the_embedder_is_english_only(tmp_path: Path) -> None:
    """Chinese queries use BM25 when the embedder is English only."""
    store = MemoryStore(tmp_path / ".memory")
    store.write(
        "回答语言",
        type="user_preference",
        description="用中文回答用户",
        body="用户希望所有回答都使用中文。",
    )
    fill(store)
    hits = store.search("请用中文回答", 3)
    assert hits and hits[0].entry.file == "回答语言.md" and hits[0].dense_rank is None
    assert "English-only" in store.index.describe()
    assert store.index.last is not None and not store.index.last.hybrid
    # the reason was the question's, not the store's: the next English question is hybrid
    hits = store.search("answer in Chinese", 3)
    assert hits[0].dense_rank is not None and store.index.last.hybrid
    assert store.index.last.why is None and "hybrid" in store.index.describe()


@pytest.mark.slow
def test_read_only_store_keeps_vectors_in_memory(tmp_path: Path) -> None:
    """A read-only store keeps its vectors in memory."""
    import shutil
    import subprocess

    root = tmp_path / ".memory"
    fill(MemoryStore(root, Config(dir=root, embedder="none")))
    shutil.rmtree(state_dir(root))

    def immutable(on: bool) -> bool:
        return (
            subprocess.run(
                ["chattr", "-R", "+i" if on else "-i", str(root)], capture_output=True
            ).returncode
            == 0
        )

    if not immutable(True):
        pytest.skip("chattr +i is not available here")
    try:
        store = MemoryStore(root, watch=False)
        assert store.read_only
        assert store.search(PARAPHRASES[0][3], 1)[0].memory.name == "staging-database"
        assert not (state_dir(root)).exists()
    finally:
        immutable(False)


def test_config_names_the_embedder_and_rejects_bad_values(tmp_path: Path) -> None:
    """Config names the embedder and rejects bad values."""
    root = tmp_path / ".memory"
    root.mkdir()
    (root / "config.toml").write_text('embedder = "bert"\n')
    with pytest.raises(ConfigError, match="embedder = 'bert' is not valid"):
        load_config({"dir": root}, environ={})
    (root / "config.toml").write_text('embedder = "http"\n')
    assert load_config({"dir": root}, environ={}).embedder == "auto"  # not trusted yet
    trust(root / "config.toml")
    config = load_config({"dir": root}, environ={"OPENAI_API_KEY": "sk-x"})
    assert config.embed_api_key == "sk-x"
    with pytest.raises(ConfigError, match="embed_model"):
        from_config(config)
    (root / "config.toml").write_text('embed_api_key = "sk-in-a-file"\n')
    with pytest.raises(ConfigError, match="unknown setting"):
        load_config({"dir": root}, environ={})


def test_cli_search_explain_shows_both_ranks(cli: CliFn, tmp_path: Path) -> None:
    """memdir search --explain shows each hit's BM25 and vector ranks."""
    fill(MemoryStore(tmp_path / ".memory"))
    r = cli("search", "--explain", *PARAPHRASES[0][3].split())
    assert r.code == 0, r.err
    assert "staging-database" in r.out and "dense #1" in r.out and "BM25 —" in r.out
    assert r.out.startswith("ranking: hybrid")
    r = cli("search", "--explain", "--json", "PostgreSQL")
    top = json.loads(r.out)[0]
    assert top["name"] == "staging-database" and top["bm25_rank"] == 1
    assert top["dense_rank"] == 1 and 0 < top["cosine"] <= 1
    r = cli("search", "PostgreSQL", env={"MEMDIR_EMBEDDER": "none"})
    assert "staging-database" in r.out


def test_a_forked_child_keeps_the_parents_session_and_makes_its_own(tmp_path: Path) -> None:
    """onnxruntime sessions do not survive fork(): freeing the parent's in a child waits for
    worker threads that are not there (the suite once hung so, in garbage collection, holding
    the store's lock). A child keeps every inherited session alive and embeds with its own."""
    import gc
    import multiprocessing

    import memdir.find.embed

    store = MemoryStore(tmp_path / ".memory")
    fill(store)
    assert store.search(PARAPHRASES[0][3], 1)[0].memory.name == "staging-database"
    embedder = store.index.ranker().embedder
    assert isinstance(embedder, MiniLM)

    def child(queue: Any) -> None:
        inherited = embedder.session
        kept = any(s is inherited for s in memdir.find.embed._INHERITED)
        found = store.search(PARAPHRASES[1][3], 1)[0].memory.name  # embeds in the child
        store.close()
        gc.collect()
        queue.put((kept, embedder.session is not inherited, found))

    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=child, args=(queue,))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0, "the child hung or failed"
    assert queue.get(timeout=5) == (True, True, "indentation")
    assert embedder.session is not None and not memdir.find.embed._INHERITED  # the parent's own


@pytest.mark.slow
def test_one_embedder_per_process_for_every_store(tmp_path: Path) -> None:
    """Six stores searched in one process hold one model, not six."""
    import subprocess
    import sys

    from conftest import child_env

    script = """
import resource, sys
from pathlib import Path
from memdir import MemoryStore
base = Path(sys.argv[1])
for i in range(int(sys.argv[2])):
    s = MemoryStore(base / f"s{i}")
    s.write("n", type="project_fact", description="Staging runs PostgreSQL", body="pg 16")
    assert s.search("PostgreSQL database", 1)[0].cosine is not None
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

    def peak(n: int) -> int:
        r = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / f"run{n}"), str(n)],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=300,
        )
        assert r.returncode == 0, r.stderr
        return int(r.stdout.split()[-1])  # KiB

    one, six = peak(1), peak(6)
    assert six - one < 60 * 1024, (one, six)  # a second model alone is ~100 MB


def test_a_junk_model_file_is_one_warning_not_a_traceback(cli: CliFn, tmp_path: Path) -> None:
    """A junk model file is one warning, not a traceback."""
    junk = tmp_path / "model.onnx"
    junk.write_bytes(os.urandom(4096))
    cli("add", "db", "--type", "project_fact", "-d", "Staging runs PostgreSQL", "--body", "pg")
    r = cli(
        "search",
        "--explain",
        "PostgreSQL",
        env={"MEMDIR_EMBED_MODEL": str(junk), "MEMDIR_EMBEDDER": "minilm"},
    )
    assert r.code == 0 and "db" in r.out and "Traceback" not in r.err
    assert "is not a usable ONNX model" in r.out + r.err


@pytest.mark.slow
def test_an_endpoint_that_failed_is_left_alone_by_the_next_process(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    """Every hook is a new process: one that finds the endpoint just failed does not ask it
    (or wait for it) again for RETRY_AFTER seconds."""
    import subprocess
    import sys

    from conftest import child_env

    root = tmp_path / ".memory"
    fill(MemoryStore(root, Config(dir=root, embedder="none")))
    env = {
        **child_env(),
        "MEMDIR_EMBEDDER": "http",
        "MEMDIR_EMBED_URL": llm_server.url + "/v1",
        "MEMDIR_EMBED_MODEL": "m",
    }

    def search() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memdir", "--dir", str(root), "search", "PostgreSQL"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )

    r = search()  # the fake server answers 500
    assert r.returncode == 0 and "staging-database" in r.stdout
    asked = len(llm_server.requests)
    assert asked
    r = search()
    assert r.returncode == 0 and "staging-database" in r.stdout
    assert len(llm_server.requests) == asked


@pytest.mark.slow
def _embedded(root: Path) -> int:
    """How many memories of the store at ``root`` have a vector (0 before the cache exists)."""
    db = sqlite3.connect(str(state_dir(root) / "index.sqlite"))
    try:
        return int(db.execute("SELECT count(*) FROM vec_docs").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        db.close()


@pytest.mark.slow
def test_a_large_first_search_answers_at_once_and_embeds_the_rest_in_the_background(
    tmp_path: Path,
) -> None:
    """With more memories than a search's embedding budget covers, search answers (BM25 for
    the rest), says so, and a background process embeds the rest; 'memdir index' embeds
    everything up front."""
    import subprocess
    import sys
    import time

    from memdir.memory import Memory
    from memdir.plan import Put

    from conftest import child_env

    root = tmp_path / ".memory"
    store = MemoryStore(root, Config(dir=root, embedder="none"))
    store.apply(
        [
            Put(
                Memory(
                    f"note-{i}",
                    "project_fact",
                    f"Note {i} on topic {i % 37}",
                    f"Details of note {i}.",
                )
            )
            for i in range(600)
        ]
    )
    (root / "config.toml").write_text("embed_budget = 0\n")

    def memdir(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memdir", "--dir", str(root), *args],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=300,
        )

    r = memdir("search", "topic 5")
    assert r.returncode == 0 and "note-" in r.stdout
    assert "memories are being embedded in the background" in r.stderr
    deadline = time.monotonic() + 240
    while _embedded(root) < 600 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _embedded(root) == 600
    r = memdir("search", "topic 5")
    assert "background" not in r.stderr
    store.write("note-new", type="project_fact", description="A new note", body="new")
    r = memdir("index")
    assert r.returncode == 0 and "601 embedded for search by meaning" in r.stdout


def test_a_library_search_hands_its_backlog_to_a_background_indexer(tmp_path: Path) -> None:
    """``MemoryStore.search`` from Python on a store mostly not embedded: it answers by BM25
    without loading the model, and a background indexer embeds the memories, so the searches
    after it embed only their question; an injected embedder starts nothing."""
    import time

    from memdir.memory import Memory
    from memdir.plan import Put

    root = tmp_path / ".memory"
    MemoryStore(root, Config(dir=root, embedder="none")).apply(
        [
            Put(Memory(f"note-{i}", "project_fact", f"Note {i} on topic {i % 37}", "Details."))
            for i in range(600)
        ]
    )
    (root / "config.toml").write_text("embed_budget = 0.1\n")

    store = MemoryStore(root)
    hits = store.search("topic 5", k=3)
    assert hits and all(h.name.startswith("note-") for h in hits)
    first = store.index.backlog
    # far more than a budget covers: BM25 for now, and the model is not even loaded for it
    assert first == 600 and store.index.ranker().embedder is None
    assert "600 memories are not embedded yet" in store.index.describe()
    deadline = time.monotonic() + 240
    while _embedded(root) < 600 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _embedded(root) == 600  # nobody but the background indexer embedded them
    # (files written in the last moments have no trusted identity yet: a few may still count)
    assert store.search("topic 5", k=3) and store.index.backlog < first

    other = tmp_path / "other" / ".memory"
    MemoryStore(other, Config(dir=other, embedder="none")).apply(
        [Put(Memory(f"n-{i}", "project_fact", f"Note {i}", "x")) for i in range(300)]
    )
    (other / "config.toml").write_text("embed_budget = 0.1\n")

    class Slow(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> Any:
            time.sleep(0.05)  # slower than the budget: a backlog is left
            return super().embed(texts)

    injected = MemoryStore(other, embedder=Slow())
    injected.search("note 5")
    assert injected.index.backlog > 0
    time.sleep(2)
    from memdir import jobs

    assert not jobs.queued(state_dir(other), running=True)  # no index job was queued


def test_loaded_gives_only_an_embedder_this_process_made() -> None:
    """``loaded`` never makes a model: None until ``from_config`` made it, then that one."""
    from memdir.config import Config
    from memdir.find.embed import from_config, loaded

    config = Config(embedder="http", embed_url="http://127.0.0.1:9/v1", embed_model="loaded-test")
    assert loaded(config) is None
    made = from_config(config)
    assert made is not None and loaded(config) is made
    assert loaded(Config(embedder="none")) is None


def test_the_background_embedder_stops_when_its_store_is_deleted(tmp_path: Path) -> None:
    """A store deleted while its worker embeds it: the embedder stops at its next look
    instead of embedding what it read before (minutes of CPU for nothing)."""
    import shutil

    from memdir.integrations.workerjobs import embed_while_there

    root = tmp_path / ".memory"
    with MemoryStore(root, Config(dir=root, embedder="none")) as plain:
        for i in range(100):
            plain.write(f"fact-{i}", type="project_fact", description=f"Fact {i}", body=str(i))

    class Deleting(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> Any:
            if root.exists():
                shutil.rmtree(root)  # the person deletes the folder mid-run
            return super().embed(texts)

    emb = Deleting()
    embed_while_there(MemoryStore(root, embedder=emb))
    assert 0 < len(emb.memories) <= 16  # one small chunk, then it noticed


def test_the_library_never_embeds_past_its_budget_nor_what_the_indexer_is_doing(
    tmp_path: Path,
) -> None:
    """MemoryStore(path).search on a store nobody embedded answers within embed_budget (the
    rest by BM25, later searches carry on), and while the store's worker has an index job a
    search embeds only its question."""
    import time as clock

    from memdir import jobs

    class Slow(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> Any:
            clock.sleep(0.01 * len(texts))
            return super().embed(texts)

    root = tmp_path / ".memory"
    with MemoryStore(root, Config(dir=root, embedder="none")) as plain:
        for i in range(200):
            plain.write(f"fact-{i}", type="project_fact", description=f"Fact {i}", body=str(i))
        plain.write("staging-db", type="project_fact", description="Staging runs PostgreSQL",
                    body="PostgreSQL 17 on staging.")  # fmt: skip
    emb = Slow()
    store = MemoryStore(root, Config(dir=root, embed_budget=0.2), embedder=emb)
    assert "staging-db" in [h.name for h in store.search("postgresql staging", 5)]
    first = len(emb.memories)
    assert 0 < first < 201 and store.index.backlog  # the rest waits: nothing blocks
    job = jobs.enqueue(state_dir(root), "index")  # queued for the worker (not started here)
    assert "staging-db" in [h.name for h in store.search("postgresql staging", 5)]
    assert len(emb.memories) == first
    job.unlink()  # done
    store.search("postgresql staging", 1)
    assert len(emb.memories) > first  # on its own again, it carries on


def test_vectors_kept_are_used_and_only_a_changed_file_is_embedded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process whose files all have their vectors embeds nothing (one comparison of the
    files with the vectors, then only what changes); after a hand edit the next process
    embeds just that memory."""
    import time

    from memdir.find.vectors import VectorIndex

    root = tmp_path / ".memory"
    fill(MemoryStore(root, embedder=CountingEmbedder()))
    time.sleep(0.1)  # (older than the window in which an identity is not trusted)
    MemoryStore(root, embedder=CountingEmbedder()).search("x", 1)  # finds them in line
    compared: list[object] = []
    real = VectorIndex.sync

    def watched(self: VectorIndex, current: dict[str, str | None], *a: Any, **kw: Any) -> int:
        compared.append(kw.get("only"))
        return real(self, current, *a, **kw)

    monkeypatch.setattr(VectorIndex, "sync", watched)
    emb = CountingEmbedder()
    hits = MemoryStore(root, embedder=emb).search("postgresql", 1)
    assert hits and hits[0].cosine is not None  # hybrid, from the vectors kept
    assert compared == [None] and emb.memories == []
    compared.clear()
    path = root / "indentation.md"
    path.write_text(path.read_text().replace("never spaces", "never spaces, zebra"))
    time.sleep(0.1)
    emb = CountingEmbedder()
    assert MemoryStore(root, embedder=emb).search("zebra", 1)[0].memory.name == "indentation"
    assert compared == [None] and len(emb.memories) == 1


def _vector_rows(path: Path) -> int:
    """How many memories have a vector in the store's index at ``path`` (0: no vectors part)."""
    db = sqlite3.connect(str(path))
    try:
        return int(db.execute("SELECT count(*) FROM vec_docs").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


def test_a_prompt_answered_by_the_resident_hands_its_backlog_to_the_residents_worker(
    tmp_path: Path,
) -> None:
    """The prompt hook embeds only its question; what is left without a vector is queued as
    an index job and handed to the worker the resident gives it (no process started), which
    embeds it."""
    import json

    from memdir import jobs
    from memdir.config import load_config
    from memdir.disk.layout import state_dir
    from memdir.integrations import hooks, workerjobs
    from memdir.memory import Memory
    from memdir.plan import Put

    project = tmp_path / "app"
    (project / ".git").mkdir(parents=True)
    root = project / ".memory"
    MemoryStore(root, Config(dir=root, embedder="none")).apply(
        [
            Put(Memory(f"note-{i}", "project_fact", f"Deploy note {i}", "Deploy with make."))
            for i in range(40)
        ]
    )
    handed: list[tuple[Path, Config]] = []
    event = json.dumps({"prompt": "how do we deploy?", "cwd": str(project),
                        "hook_event_name": "UserPromptSubmit", "session_id": "s1"})  # fmt: skip
    out, err = hooks.run(
        "prompt", "claude-code", event, worker=lambda state, config: handed.append((state, config))
    )
    assert err == "" and "note-" in out
    assert [(s, c.dir) for s, c in handed] == [(state_dir(root), root)]
    assert jobs.queued(state_dir(root), "index")  # the job waits for the worker it was handed to
    jobs.work(state_dir(root), workerjobs.job_handlers(load_config({"dir": root}), by="resident"))
    assert _embedded(root) == 40
