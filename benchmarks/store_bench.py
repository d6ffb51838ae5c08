"""Store benchmark: the paths users call (``MemoryStore``, the ``memdir`` command), each next to
a baseline measured in the same run.

- write one memory into a store of N memories: ``MemoryStore.write`` against the design note's
  own method (write the file, then re-read every file with its line-based ``key: value``
  frontmatter parser and rewrite MEMORY.md);
- open and list: ``memdir list`` in a new process against the design note's index rebuild;
- first open of a hand-written store (no caches yet) through ``memdir list``;
- cold ``memdir search`` in a new process;
- readers during writes: how long ``entries()`` calls take while other processes write.

    python benchmarks/store_bench.py [--sizes 1000 10000] [--repeat 15]

(write-one: ``--repeat`` memdir writes and a fifth as many design-note writes per round, five
rounds, medians over all of them.)
"""

from __future__ import annotations

import argparse
import multiprocessing
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

from memdir import MemoryStore
from memdir import memory as memfmt
from memdir.memory import Memory

WORDS = [
    "user",
    "prefers",
    "pytest",
    "project",
    "uses",
    "postgres",
    "deploy",
    "staging",
    "review",
    "style",
    "tabs",
    "spaces",
    "docker",
    "kubernetes",
    "api",
    "latency",
    "cache",
    "redis",
    "migration",
    "schema",
    "frontend",
    "react",
    "typescript",
    "logging",
    "metrics",
    "alert",
    "on-call",
    "release",
    "branch",
    "feature",
    "flag",
    "database",
    "index",
    "query",
]


def make_store(root: Path, n: int) -> None:
    """Write n realistic memory files directly, as a person or another tool would (setup)."""
    rng = random.Random(n)
    root.mkdir(parents=True)
    types = ("user_preference", "project_fact", "feedback", "reference")
    for i in range(n):
        desc = " ".join(rng.choices(WORDS, k=8))
        body = "\n".join(" ".join(rng.choices(WORDS, k=14)) for _ in range(4))
        m = Memory(
            f"memory-{i:05d}",
            types[i % 4],
            desc,
            body,
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00Z",
        )
        (root / f"{m.name}.md").write_text(memfmt.dumps(m), encoding="utf-8")


# -- the design note's method, as it describes it ----------------------------------------------


def note_parse_frontmatter(text: str) -> tuple[dict[str, str], str]:
    """The design note's parser: split on the '---' lines, then 'key: value' per line."""
    if not text.startswith("---"):
        return {}, text
    parts = text.split("---", 2)
    if len(parts) < 3:
        return {}, text
    meta = {}
    for line in parts[1].strip().splitlines():
        if ":" in line:
            key, value = line.split(":", 1)
            meta[key.strip()] = value.strip()
    return meta, parts[2].strip()


def note_rebuild_index(root: Path) -> list[dict[str, str]]:
    """The design note's ``_rebuild_index``: scan every .md file, parse it, write MEMORY.md."""
    metas = []
    for path in sorted(root.glob("*.md")):
        if path.name == "MEMORY.md":
            continue
        meta, _ = note_parse_frontmatter(path.read_text(encoding="utf-8"))
        if meta:
            metas.append(meta)
    lines = ["# Memory Index", ""]
    lines += [
        f"- [{m.get('name')}]({m.get('name')}.md) ({m.get('type')}): {m.get('description')}"
        for m in metas
    ]
    (root / "MEMORY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return metas


def note_write_memory_file(root: Path, name: str) -> None:
    """The design note's ``write_memory_file``: write the file, then rebuild the index."""
    text = (
        f"---\nname: {name}\ntype: project_fact\ndescription: benchmark write\n---\n"
        "benchmark body\n"
    )
    (root / f"{name}.md").write_text(text, encoding="utf-8")
    note_rebuild_index(root)


# -- helpers --------------------------------------------------------------------------------


ROUNDS = 5  # write-one is timed in rounds that alternate memdir's and the design note's


def times_of(fn: Callable[[int], object], repeat: int) -> list[float]:
    times = []
    for i in range(repeat):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return times


def median_time(fn: Callable[[int], object], repeat: int) -> float:
    return statistics.median(times_of(fn, repeat))


def memdir_cmd(root: Path, *args: str) -> float:
    """Seconds one ``memdir`` process takes (start-up included)."""
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "memdir", "--dir", str(root), *args],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - t0


def _writer(root: str, tag: str, count: int) -> None:
    store = MemoryStore(root, watch=False)
    for i in range(count):
        store.write(
            f"w-{tag}-{i}", type="project_fact", description=f"writer {tag} {i}", body="x" * 200
        )


def readers_during_writes(root: Path, writers: int = 2, writes: int = 150) -> list[float]:
    """Times of ``entries()`` calls made while other processes write."""
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_writer, args=(str(root), f"{os.getpid()}-{k}", writes))
        for k in range(writers)
    ]
    reader = MemoryStore(root, watch=False)
    for p in procs:
        p.start()
    times = []
    while any(p.is_alive() for p in procs):
        t0 = time.perf_counter()
        reader.entries()
        times.append(time.perf_counter() - t0)
        time.sleep(0.005)
    for p in procs:
        p.join()
    return times


def measure(n: int, repeat: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="memdir-bench-"))
    out: dict[str, float] = {"n": n}
    try:
        make_store(tmp / "memdir", n)
        shutil.copytree(tmp / "memdir", tmp / "note")
        out["first_open"] = memdir_cmd(tmp / "memdir", "list")  # builds the caches
        store = MemoryStore(tmp / "memdir", watch=False)
        # In rounds, each method in turn, so that both meet the disk in the same moods.
        writes: list[float] = []
        note_writes: list[float] = []
        for r in range(ROUNDS):
            writes += times_of(
                lambda i, r=r: store.write(
                    f"new-{r}-{i}", type="project_fact", description="benchmark write", body="x"
                ),
                repeat,
            )
            note_writes += times_of(
                lambda i, r=r: note_write_memory_file(tmp / "note", f"new-{r}-{i}"),
                max(3, repeat // 5),
            )
        out["write"] = statistics.median(writes)
        out["note_write"] = statistics.median(note_writes)
        out["list"] = median_time(lambda i: MemoryStore(tmp / "memdir", watch=False).entries(), 5)
        out["cli_list"] = statistics.median(memdir_cmd(tmp / "memdir", "list") for _ in range(5))
        out["note_list"] = median_time(lambda i: note_rebuild_index(tmp / "note"), 3)
        memdir_cmd(tmp / "memdir", "search", "warm", "up")  # builds the search index
        out["search"] = statistics.median(
            memdir_cmd(tmp / "memdir", "search", "deploy", "staging", "postgres") for _ in range(5)
        )
        reads = readers_during_writes(tmp / "memdir")
        out["read_median"] = statistics.median(reads)
        out["read_max"] = max(reads)
        return out
    finally:
        shutil.rmtree(tmp)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    rows = [measure(n, args.repeat) for n in args.sizes]
    print(
        "| memories | `MemoryStore.write` | design note | speed-up"
        " | open + `entries()` | design note index rebuild | speed-up |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {int(r['n']):,} | {r['write'] * 1e3:.1f} ms | {r['note_write'] * 1e3:.0f} ms |"
            f" {r['note_write'] / r['write']:.0f}x | {r['list'] * 1e3:.0f} ms |"
            f" {r['note_list'] * 1e3:.0f} ms | {r['note_list'] / r['list']:.1f}x |"
        )
    print()
    print(
        "| memories | first `memdir list` of hand-written files | `memdir list` | cold"
        " `memdir search` | `entries()` while 2 processes write: median / max |"
    )
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {int(r['n']):,} | {r['first_open']:.2f} s | {r['cli_list'] * 1e3:.0f} ms |"
            f" {r['search'] * 1e3:.0f} ms | {r['read_median'] * 1e3:.2f} ms /"
            f" {r['read_max'] * 1e3:.1f} ms |"
        )


if __name__ == "__main__":
    main()
