"""Store benchmark: write one memory and open+list, memdir vs the naive design, same run.

The naive baseline follows the original design literally: after each write, re-scan and
re-parse every memory file and rewrite MEMORY.md.

    python benchmarks/store_bench.py [--sizes 1000 10000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from memdir import MemoryStore
from memdir import memory as memfmt
from memdir.memory import Memory

WORDS = [
    "user", "prefers", "pytest", "project", "uses", "postgres", "deploy", "staging", "review",
    "style", "tabs", "spaces", "docker", "kubernetes", "api", "latency", "cache", "redis",
    "migration", "schema", "frontend", "react", "typescript", "logging", "metrics", "alert",
    "on-call", "release", "branch", "feature", "flag", "database", "index", "query",
]


def make_store(root: Path, n: int) -> None:
    """Write n realistic memory files directly (setup, not measured)."""
    rng = random.Random(n)
    root.mkdir(parents=True)
    types = ("user_preference", "project_fact", "feedback", "reference")
    for i in range(n):
        desc = " ".join(rng.choices(WORDS, k=8))
        body = "\n".join(" ".join(rng.choices(WORDS, k=14)) for _ in range(4))
        m = Memory(f"memory-{i:05d}", types[i % 4], desc, body, "2026-01-01T00:00:00Z",
                   "2026-01-01T00:00:00Z")
        (root / f"{m.name}.md").write_text(memfmt.dumps(m), encoding="utf-8")


def naive_write(root: Path, name: str) -> None:
    """The naive design: write the file, then re-scan and re-parse all files, rewrite index."""
    m = Memory(name, "project_fact", "naive write", "body", memfmt.now(), memfmt.now())
    (root / f"{name}.md").write_text(memfmt.dumps(m), encoding="utf-8")
    naive_index(root)


def naive_index(root: Path) -> list[dict[str, str]]:
    metas = []
    for path in sorted(root.glob("*.md")):
        if path.name == "MEMORY.md":
            continue
        head = path.read_text(encoding="utf-8").split("---\n")[1]
        metas.append(yaml.safe_load(head))
    lines = [f"- [{m['name']}]({m['name']}.md) — {m['description']}" for m in metas]
    (root / "MEMORY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return metas


def median_time(fn: Callable[[int], object], repeat: int) -> float:
    times = []
    for i in range(repeat):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(n: int, repeat: int) -> tuple[int, float, float, float, float]:
    """Median times for one store size: memdir write, naive write, memdir open+list, naive."""
    tmp = Path(tempfile.mkdtemp(prefix="memdir-bench-"))
    try:
        make_store(tmp / "memdir", n)
        shutil.copytree(tmp / "memdir", tmp / "naive")
        store = MemoryStore(tmp / "memdir")  # the first open builds the cache (not measured)
        write = median_time(lambda i: store.write(
            f"new-{i}", type="project_fact", description="benchmark write", body="x"), repeat)
        naive_w = median_time(lambda i: naive_write(tmp / "naive", f"new-{i}"), max(3, repeat // 5))
        open_list = median_time(lambda i: MemoryStore(tmp / "memdir").entries(), repeat)
        naive_l = median_time(lambda i: naive_index(tmp / "naive"), max(3, repeat // 5))
        return n, write, naive_w, open_list, naive_l
    finally:
        shutil.rmtree(tmp)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    rows = [measure(n, args.repeat) for n in args.sizes]
    print("| memories | write one: memdir | naive | speed-up | open+list: memdir | naive |"
          " speed-up |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, w, nw, ol, nl in rows:
        print(f"| {n:,} | {w * 1e3:.1f} ms | {nw * 1e3:.0f} ms | {nw / w:.0f}x |"
              f" {ol * 1e3:.1f} ms | {nl * 1e3:.0f} ms | {nl / ol:.1f}x |")


if __name__ == "__main__":
    main()
