"""Scopes benchmark: recall over three stores of N memories (project, user, shared read-only)
against one store of 3N, through the path the agent calls (``load_memories`` without a model:
search chooses, bodies are read and wrapped), in one long-running process each.

The same 3N memories (LoCoMo observation sentences, English prose) are split over the three
stores or kept in one, so the two setups hold exactly the same text; the share of questions
whose top 5 scores are the same in both shows that scores compare across stores.

    pip install -e '.[bench,embed]'
    python benchmarks/scopes_bench.py [--per-store 10000] [--embedder none|minilm]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from memdir import memory as memfmt
from memdir.config import Config
from memdir.memory import Memory
from memdir.recall import load_memories
from memdir.scopes import Scopes
from memdir.store import MemoryStore


def write(root: Path, names: range, sentences: list[str], seed: int) -> None:
    root.mkdir(parents=True)
    for i in names:
        rng = random.Random(seed * 1_000_003 + i)  # the same memory whichever store holds it
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


def timed(
    reader: MemoryStore | Scopes, questions: list[str]
) -> tuple[float, float, list[list[float]]]:
    for q in questions[:20]:
        load_memories(reader, [{"role": "user", "content": q}])
    times, picks = [], []
    for q in questions:
        messages = [{"role": "user", "content": q}]
        t = time.perf_counter()
        load_memories(reader, messages)
        times.append(time.perf_counter() - t)
        picks.append([round(h.score, 6) for h in reader.search(q, 5)])
    times.sort()
    return statistics.median(times) * 1e3, times[int(len(times) * 0.9)] * 1e3, picks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--bench-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "bench"
    )
    ap.add_argument("--per-store", type=int, default=10_000)
    ap.add_argument("--embedder", default="none", choices=["none", "minilm"])
    args = ap.parse_args()
    data = json.loads((args.bench_dir / "locomo" / "observations_dev.json").read_text())
    sentences = sorted({m["text"] for m in data["memories"]})
    questions = [q["question"] for q in data["queries"]][:200]
    n = args.per_store
    tmp = Path(tempfile.mkdtemp(prefix="memdir-scopes-"))
    try:
        one = tmp / "one" / ".memory"
        write(one, range(3 * n), sentences, 1)
        three = [tmp / "project" / ".memory", tmp / "user", tmp / "team" / ".memory"]
        for k, root in enumerate(three):
            write(root, range(k * n, (k + 1) * n), sentences, 1)
        # the shared store's caches go to the cache folder; keep them inside the run
        import os

        os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")

        config = Config(dir=one, embedder=args.embedder)
        t0 = time.perf_counter()
        single = MemoryStore(one, config, watch=True)
        single.search("warm up", 5)
        built_one = time.perf_counter() - t0
        med1, p90_1, picks1 = timed(single, questions)
        single.close()

        pconfig = Config(
            dir=three[0], embedder=args.embedder, user_dir=three[1], read_only=(str(three[2]),)
        )
        t0 = time.perf_counter()
        project = MemoryStore(three[0], pconfig, watch=True)
        scopes = Scopes(pconfig, project=project, watch=True)
        scopes.search("warm up", 5)
        built_three = time.perf_counter() - t0
        assert [s.name for s, _ in scopes.stores()] == ["project", "user", "shared:team"]
        med3, p90_3, picks3 = timed(scopes, questions)
        same = sum(a == b for a, b in zip(picks1, picks3, strict=True)) / len(questions)
        print(
            f"recall (`load_memories`, search chooses; embedder {args.embedder}),"
            f" {len(questions)} LoCoMo questions, warm:"
        )
        print("| setup | median | p90 | first open + index |")
        print("|---|---|---|---|")
        print(f"| one store of {3 * n:,} | {med1:.1f} ms | {p90_1:.1f} ms | {built_one:.1f} s |")
        print(
            f"| project + user + shared, {n:,} each | {med3:.1f} ms | {p90_3:.1f} ms |"
            f" {built_three:.1f} s |"
        )
        print(
            f"ratio (three stores / one): median {med3 / med1:.2f}×, p90 {p90_3 / p90_1:.2f}×;"
            f" the top 5 scores are the same as one store's for {same:.0%} of the questions"
            " (ties among equal scores may order differently)"
        )
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
