"""Consolidation benchmark: the automatic run after one new memory in a large store, against a
whole-store pass (what every automatic run did before) in the same run.

Counts model calls and the CPU time spent outside the model (the model is a scripted
``FakeModel`` that answers at once, so process CPU time is memdir's own work).

    python benchmarks/consolidate_bench.py [--size 10000]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from memdir import MemoryStore
from memdir import memory as memfmt
from memdir.config import Config
from memdir.learn.consolidate import consolidate_memories
from memdir.memory import Memory
from memdir_testing import FakeModel

TOPICS = [
    f"{a}-{b}"
    for a in ("api", "db", "ui", "ci", "auth", "cache", "queue", "search", "billing", "deploy")
    for b in (
        "latency",
        "schema",
        "limits",
        "owners",
        "runbook",
        "alerts",
        "tests",
        "config",
        "versions",
        "costs",
    )
]
WORDS = (
    "staging production retries timeout postgres redis kafka docker nightly weekly owner"
    " team budget region replica index migration rollout canary flag"
).split()


def make_store(root: Path, n: int) -> None:
    rng = random.Random(n)
    root.mkdir(parents=True)
    for i in range(n):
        topic = rng.choice(TOPICS)
        desc = f"{topic.replace('-', ' ')} " + " ".join(rng.choices(WORDS, k=6))
        m = Memory(
            f"{topic}-{i}",
            "project_fact",
            desc,
            " ".join(rng.choices(WORDS, k=40)),
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00Z",
        )
        (root / f"{m.name}.md").write_text(memfmt.dumps(m), encoding="utf-8")


def run(store: MemoryStore, **kw: object) -> tuple[int, float, float]:
    model = FakeModel(default={"merge": [], "retire": []})
    cpu, wall = time.process_time(), time.perf_counter()
    consolidate_memories(store, model, **kw)  # type: ignore[arg-type]
    return len(model.calls), time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=10_000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="memdir-consolidate-"))
    try:
        root = tmp / ".memory"
        make_store(root, args.size)
        store = MemoryStore(root, Config(dir=root), watch=False)
        run(store, whole=True)  # the first pass: afterwards only changes count
        store.write(
            "db-latency-new",
            type="project_fact",
            description="db latency staging postgres replica budget",
            body="p99 under 40 ms on the staging replica",
        )
        auto = run(store)
        whole = run(store, whole=True, dry_run=True)
        print(
            f"| after one new memory in {args.size:,} | model calls | CPU outside the model |"
            " wall |"
        )
        print("|---|---:|---:|---:|")
        print(
            f"| automatic run (changed memories and their neighbours) | {auto[0]} |"
            f" {auto[1]:.2f} s | {auto[2]:.2f} s |"
        )
        print(f"| whole-store pass (`--all`) | {whole[0]} | {whole[1]:.2f} s | {whole[2]:.2f} s |")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
