"""Many long-lived processes on one store: the cost of a write with file-system watchers on,
against the same processes with watchers off, in one run.

Each of N processes opens the store as an MCP server or a chat does (``watch=True``: a watchdog
observer on the folder) and writes memories through ``MemoryStore.write`` while the others do
the same; the baseline is the same N processes with ``watch=False``. Reported: CPU per write,
summed over every process (what a write costs the machine), wall time, operations that failed
with StoreLocked, and memories lost.

    python benchmarks/watch_bench.py [--procs 16 32] [--writes 30] [--store 300]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def _writer(root: Path, i: int, n: int, watch: bool, start: Any, out: Any) -> None:
    from memdir import MemoryStore
    from memdir.errors import StoreLocked

    store = MemoryStore(root, watch=watch)
    store.entries()
    start.wait()
    cpu, locked = time.process_time(), 0
    for k in range(n):
        try:
            store.write(
                f"p{i}-{k}", type="project_fact", description=f"note {i} {k}", body="x" * 200
            )
        except StoreLocked:
            locked += 1
    store.entries()  # what the others wrote, seen as a server would
    out.put((time.process_time() - cpu, locked))


def run(procs: int, writes: int, size: int, watch: bool) -> dict[str, float]:
    from memdir import MemoryStore

    root = Path(tempfile.mkdtemp()) / ".memory"
    store = MemoryStore(root)
    for k in range(size):
        store.write(f"base-{k}", type="project_fact", description=f"base {k}", body="y")
    start, out = mp.Event(), mp.Queue()
    workers = [
        mp.Process(target=_writer, args=(root, i, writes, watch, start, out)) for i in range(procs)
    ]
    for w in workers:
        w.start()
    time.sleep(2)  # every process open and (with watch) observing
    began = time.monotonic()
    start.set()
    results = [out.get() for _ in workers]
    for w in workers:
        w.join()
    wall = time.monotonic() - began
    names = {e.name for e in MemoryStore(root).entries()}
    lost = sum(1 for i in range(procs) for k in range(writes) if f"p{i}-{k}" not in names)
    locked = sum(r[1] for r in results)
    return {
        "cpu_ms": 1000 * sum(r[0] for r in results) / (procs * writes),
        "wall": wall,
        "locked": locked,
        "lost": lost - locked,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, nargs="+", default=[16, 32])
    ap.add_argument("--writes", type=int, default=30)
    ap.add_argument("--store", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    mp.set_start_method("fork")
    print("| processes | watchers | CPU per write (median) | wall | StoreLocked | lost |")
    print("|---:|---|---:|---:|---:|---:|")
    for procs in args.procs:
        for watch in (True, False):
            rows = [run(procs, args.writes, args.store, watch) for _ in range(args.repeat)]
            print(
                f"| {procs} | {'on' if watch else 'off (baseline)'} |"
                f" {statistics.median(r['cpu_ms'] for r in rows):.1f} ms |"
                f" {statistics.median(r['wall'] for r in rows):.1f} s |"
                f" {sum(int(r['locked']) for r in rows)} | {sum(int(r['lost']) for r in rows)} |"
            )


if __name__ == "__main__":
    main()
