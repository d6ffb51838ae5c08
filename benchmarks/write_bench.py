"""Writing one memory into a store of N (embedder off): ``MemoryStore.write`` against the design
note's own method (write the file, then rebuild the index from every file), and, with
``--before DIR``, against the ``MemoryStore.write`` of another checkout's ``src`` (the code
before a change) — each in a process of its own, taking turns, in the same run.

    python benchmarks/write_bench.py [--size 10000] [--writes 40] [--rounds 5] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

CHILD = r"""
import json, os, statistics, sys, time
from pathlib import Path
from memdir import MemoryStore
from memdir.config import Config
root, writes, tag = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
store = MemoryStore(root, Config(dir=root, embedder="none"))
store.entries()
times = []
for i in range(writes):
    started = time.perf_counter()
    store.write(f"bench-{tag}-{i}", type="project_fact", description=f"bench {tag} {i}",
                body=f"one more memory, number {i}")
    times.append(time.perf_counter() - started)
for i in range(writes):
    store.delete(f"bench-{tag}-{i}")
print(json.dumps(times))
"""


def memdir_writes(src: Path, root: Path, writes: int, tag: str) -> list[float]:
    """``writes`` timed writes by the memdir at ``src`` (its own process)."""
    env = {**os.environ, "PYTHONPATH": str(src), "MEMDIR_EMBEDDER": "none"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(writes), tag],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return [float(t) for t in json.loads(out.stdout)]


def main() -> None:
    from store_bench import make_store, note_rebuild_index

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=10000)
    ap.add_argument("--writes", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--before", type=Path, help="a checkout whose src/ is the code before")
    args = ap.parse_args()
    here = Path(__file__).resolve().parents[1] / "src"
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(base / "state")
        root = base / ".memory"
        make_store(root, args.size)
        memdir_writes(here, root, 2, "warm")  # the store's index built once, not timed
        arms: dict[str, list[float]] = {"memdir": [], "before": [], "design note": []}
        for r in range(args.rounds):
            arms["memdir"] += memdir_writes(here, root, args.writes, f"n{r}")
            if args.before is not None:
                arms["before"] += memdir_writes(args.before / "src", root, args.writes, f"b{r}")
            for i in range(max(1, args.writes // 10)):
                started = time.perf_counter()
                (root / f"note-{r}-{i}.md").write_text(
                    f"---\nname: note-{r}-{i}\ntype: project_fact\ndescription: n\n---\nbody\n"
                )
                note_rebuild_index(root)
                arms["design note"].append(time.perf_counter() - started)
                (root / f"note-{r}-{i}.md").unlink()
    note = statistics.median(arms["design note"])
    print(f"write one memory into {args.size:,} (embedder off), {args.rounds} rounds")
    print(f"{'arm':<14}{'median':>10}{'p10':>10}{'p90':>10}{'design note / arm':>20}")
    for arm, times in arms.items():
        if not times:
            continue
        q = statistics.quantiles(times, n=10)
        med = statistics.median(times)
        print(
            f"{arm:<14}{med * 1000:>8.2f}ms{q[0] * 1000:>8.2f}ms{q[-1] * 1000:>8.2f}ms"
            f"{note / med:>19.0f}x"
        )


if __name__ == "__main__":
    main()
