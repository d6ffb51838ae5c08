"""The store's one index against the code before it, in the same run: the paths a user calls
on a folder of hand-written memories (BM25; nothing embedded).

- a fresh store (never opened): a new process opens it and searches, then searches again;
- a large store after ``memdir index``: warm ``MemoryStore.search`` in one process, and a
  word added to one memory's body by hand found by the next search (and how long that took);
- writing one memory into the store (crash-safe: the file, history, log, MEMORY.md, index).

The code before is another checkout (``--before``, e.g. a ``git worktree`` of the commit
before the change); each side runs in its own processes with its own state folder.

    python benchmarks/index_bench.py --before /tmp/before/src [--memories 10000]
        [--large 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
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

QUERIES = ["database index query flag", "on-call alert policy", "release branch feature",
           "deploy the service", "tests and migrations"]  # fmt: skip


def child(root: str, what: str) -> None:
    """One process: ``what`` on the store at ``root``; prints its timings as JSON."""
    from memdir import MemoryStore
    from memdir.config import Config
    from memdir.plan import Put

    out: dict[str, object] = {}
    began = time.monotonic()
    store = MemoryStore(root, Config(dir=Path(root), embedder="none"))
    out["open"] = time.monotonic() - began
    store._lookup.hand_over = False  # (no background indexer left running after it)
    if what == "index":
        getattr(store, "index", store).embed_all()  # (the code before: on the store)
    elif what == "fresh":
        began = time.monotonic()
        assert len(store.search(QUERIES[0], k=5)) == 5
        out["first"] = time.monotonic() - began
        later = []
        for q in QUERIES[1:] * 2:
            began = time.monotonic()
            store.search(q, k=5)
            later.append(time.monotonic() - began)
        out["later"] = statistics.median(later)
    elif what == "warm":
        store.search(QUERIES[0], k=5)
        times = []
        for i in range(30):
            began = time.monotonic()
            store.search(QUERIES[i % len(QUERIES)], k=5)
            times.append(time.monotonic() - began)
        out["warm"] = statistics.median(times)
        path = Path(root) / "memory-00077.md"
        with open(path, "a", encoding="utf-8") as fh:
            fh.write("zanzibarquartz\n")
        time.sleep(0.1)  # (out of the window in which an identity is too recent to trust)
        began = time.monotonic()
        hits = store.search("zanzibarquartz", k=5)
        out["edit_found"] = bool(hits) and hits[0].name == "memory-00077"
        out["after_edit"] = time.monotonic() - began
    elif what == "write":
        from memdir.memory import Memory

        times = []
        for i in range(20):
            mem = Memory(f"bench-{i}", "project_fact", f"bench note {i}", f"body of note {i}")
            began = time.monotonic()
            store.apply([Put(mem)], source="api")
            times.append(time.monotonic() - began)
        out["write"] = statistics.median(times)
    store.close()
    print(json.dumps(out))


def measure(src: str, state: Path, root: Path, what: str) -> dict[str, float]:
    env = {**os.environ, "MEMDIR_EMBEDDER": "none", "PYTHONPATH": src,
           "XDG_STATE_HOME": str(state)}  # fmt: skip
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(root), what],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", help="the src folder of the code before (required)")
    ap.add_argument("--memories", type=int, default=10000)
    ap.add_argument("--large", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    if not args.before:
        ap.error("--before is required")
    sides = {"before": str(Path(args.before).resolve()), "now": str(HERE.parent / "src")}
    work = Path(tempfile.mkdtemp())
    small, large = work / "small", work / "large"
    make_store(small, args.memories)
    make_store(large, args.large)
    time.sleep(2)  # (as old as a person's files are: not racy)
    rows: dict[str, dict[str, list[float]]] = {s: {} for s in sides}

    def note(side: str, got: dict[str, float]) -> None:
        for key, value in got.items():
            rows[side].setdefault(key, []).append(float(value))

    for _ in range(args.runs):
        for side, src in sides.items():  # alternating
            state = work / f"state-{side}"
            root = work / f"fresh-{side}"
            shutil.rmtree(state, ignore_errors=True)
            shutil.rmtree(root, ignore_errors=True)
            shutil.copytree(small, root)
            time.sleep(2)
            note(side, {f"fresh_{k}": v for k, v in measure(src, state, root, "fresh").items()})
            note(side, {f"{k}": v for k, v in measure(src, state, root, "write").items()
                        if k == "write"})  # fmt: skip
    for side, src in sides.items():
        state = work / f"state-large-{side}"
        root = work / f"large-{side}"
        shutil.copytree(large, root)
        time.sleep(2)
        began = time.monotonic()
        measure(src, state, root, "index")
        note(side, {"index_large": time.monotonic() - began})
        for _ in range(args.runs):
            note(side, measure(src, state, root, "warm"))
            path = root / "memory-00077.md"  # (the edit undone for the next run)
            path.write_text(path.read_text().replace("zanzibarquartz\n", ""))
            time.sleep(0.1)

    def med(side: str, key: str) -> str:
        values = rows[side].get(key, [])
        if not values:
            return "—"
        m = statistics.median(values)
        return f"{m * 1000:.1f} ms" if m < 1 else f"{m:.2f} s"

    print(f"BM25, nothing embedded; {args.memories:,} and {args.large:,} hand-written memories;")
    print(f"medians of {args.runs} runs")
    print("| measure | before | now |")
    print("|---|---:|---:|")
    labels = [
        ("fresh_open", f"open a fresh {args.memories:,}-memory store (new process)"),
        ("fresh_first", "its first search"),
        ("fresh_later", "the searches after it (median)"),
        ("write", f"write one memory into {args.memories:,}"),
        ("index_large", f"`memdir index` of {args.large:,} never-seen files (whole process)"),
        ("open", f"open the indexed {args.large:,}-memory store (new process)"),
        ("warm", f"warm search at {args.large:,}"),
        ("after_edit", "the search after a hand edit of one body"),
    ]
    for key, label in labels:
        print(f"| {label} | {med('before', key)} | {med('now', key)} |")
    for side in sides:
        found = rows[side].get("edit_found", [])
        print(f"{side}: hand-edited body found next {sum(found):.0f}/{len(found)}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
