"""The first searches of a library user (`MemoryStore(path).search` from Python) over a store of
hand-written memories that has never been embedded, with `memdir[embed]` installed.

memdir: a first search over a store mostly not embedded (more than 256 memories to embed)
ranks by BM25 without loading the model and hands the backlog to a background indexer; the
searches after it embed only their question (BM25 alone until the store is nearly embedded).
Baseline, same run, same files: each search embeds for its budget itself (what a library
search did before the hand-over). Medians of the searches that follow the first. The files
are left two seconds after copying, so that they are as old as a person's files are (not
racy).

    python benchmarks/library_bench.py [--memories 10000] [--searches 10]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from store_bench import make_store  # noqa: E402

QUERIES = ["database index query flag", "on-call alert policy", "release branch feature",
           "deploy the service", "tests and migrations"]  # fmt: skip


def run(root: Path, searches: int, mode: str) -> tuple[float, float, list[float]]:
    from memdir import MemoryStore

    began = time.monotonic()
    store = MemoryStore(root)
    opened = time.monotonic() - began
    if mode == "embed":  # the baseline: every search loads the model and embeds for its budget
        store._lookup.hand_over = store._lookup.background = False
    began = time.monotonic()
    store.search(QUERIES[0], k=5)
    first = time.monotonic() - began
    after = []
    for i in range(searches):
        began = time.monotonic()
        store.search(QUERIES[(i + 1) % len(QUERIES)], k=5)
        after.append(time.monotonic() - began)
    store.close()
    return opened, first, after


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=10000)
    ap.add_argument("--searches", type=int, default=10)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp())
    source = work / "source"
    make_store(source, args.memories)
    print(f"{args.memories:,} hand-written memories, never embedded; {args.searches} searches")
    print("| | open | first search | searches after it (median / max) |")
    print("|---|---:|---:|---:|")
    try:
        arms = (
            ("baseline: each search embeds its budget", "embed"),
            ("memdir: the backlog left to the store's worker", "memdir"),
        )
        for label, mode in arms:
            root = work / mode
            shutil.copytree(source, root)
            time.sleep(2)
            opened, first, after = run(root, args.searches, mode)
            print(
                f"| {label} | {opened:.2f} s | {first:.2f} s |"
                f" {statistics.median(after) * 1000:.0f} ms / {max(after) * 1000:.0f} ms |"
            )
    finally:  # the user's worker, finding the folders gone, stops embedding them
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
