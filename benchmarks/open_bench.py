"""A process's first open and first search of a large store of hand-written memories, the way
a library user or a `memdir` command meets it: never seen (every file read and parsed for the
catalogue MEMORY.md must match), and seen before (the metadata cache and the search index
kept, nothing embedded).

memdir pauses the cyclic garbage collector while a sweep parses files and while the metadata
cache loads; the search index notes the catalogue fingerprint of the files it was last found
to match, so that a later process with those very files does not compare them one by one;
when a sweep has very many files to parse, a forked copy of the process parses half of them
on the other core, and when the metadata cache is large, a forked copy lists the folder while
the process reads the cache (``memdir.forked``). The baseline in the same run is the same
code with all of these turned off (the collector left on, every first search comparing every
file, every file listed and parsed in one process), which is what opening did before; the
middle row turns off the forked copies alone. Each figure is a fresh process; medians of
the runs, the rows alternating.

    python benchmarks/open_bench.py [--memories 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from store_bench import make_store  # noqa: E402

QUERY = "database index query flag"


def child(root: str, mode: str) -> None:
    """One process: open the store, search once, print the two times as JSON."""
    if mode in ("baseline", "serial"):
        from memdir import forked

        forked.can_fork = lambda: False  # (every file listed and parsed in this process)
    if mode == "baseline":
        from memdir import folder, lookup

        folder.paused_gc = contextlib.nullcontext  # type: ignore[assignment]
        lookup.Lookup._token = lambda self: None  # type: ignore[method-assign]
    from memdir import MemoryStore

    began = time.monotonic()
    store = MemoryStore(root)
    opened = time.monotonic() - began
    store._lookup.hand_over = False  # (no background indexer left running after it)
    began = time.monotonic()
    hits = store.search(QUERY, k=5)
    first = time.monotonic() - began
    store.close()
    print(json.dumps({"open": opened, "first": first, "hits": len(hits)}))


def measure(root: Path, mode: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(root), mode],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "MEMDIR_EMBEDDER": "none"},
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    assert result["hits"] == 5, result
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    work = Path(tempfile.mkdtemp())
    source = work / "source"
    make_store(source, args.memories)
    modes = ("baseline", "serial", "memdir")
    never: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    seen: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for _ in range(args.runs):
        for mode in modes:
            root = work / "fresh"
            shutil.rmtree(root, ignore_errors=True)
            shutil.copytree(source, root)
            time.sleep(2)  # (as old as a person's files are: not racy)
            never[mode].append(measure(root, mode))
    kept = work / "kept"
    shutil.copytree(source, kept)
    time.sleep(2)
    from memdir import MemoryStore

    store = MemoryStore(kept)  # the search index built once, as a background indexer does
    store._lookup.defer_text_at = 10**12
    store._lookup.hand_over = store._lookup.background = False
    store.search(QUERY, k=5)
    store.close()
    measure(kept, "memdir")  # the first process after the build finds the index in line
    for _ in range(args.runs):
        for mode in modes:
            seen[mode].append(measure(kept, mode))

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    n, runs = args.memories, args.runs
    print(f"{n:,} hand-written memories, BM25 (nothing embedded); medians of {runs}")
    print("| | never seen: open | first search | both | seen before: open | first search | both |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    labels = (
        "baseline: collector on, every file compared, all parsed here",
        "memdir without a forked copy (listed and parsed here)",
        "memdir",
    )
    for mode, label in zip(modes, labels, strict=True):
        cells = []
        for rows in (never[mode], seen[mode]):
            for r in rows:
                r["both"] = r["open"] + r["first"]
            cells += [f"{med(rows, key):.2f} s" for key in ("open", "first", "both")]
        print(f"| {label} | {' | '.join(cells)} |")
    print("each run (open + first search):")
    for mode in modes:
        print(mode, [f"{r['open']:.2f}+{r['first']:.2f}" for r in never[mode] + seen[mode]])
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
