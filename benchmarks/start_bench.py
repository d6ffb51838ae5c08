"""What a session start costs: the text a host gets at ``SessionStart`` (``standing``: the
standing rules within their budget, what waits for the user, the memory index), built for a
store of N memories, of which a share are of a standing kind (preferences, feedback), most
the user's own (written through memdir) and some dropped into the folder by hand (a door:
they wait). Timed in one process after a warm-up (as the resident answers the hook), against
the code before (``--before``, the src folder of another checkout) in the same run; each side
in its own processes with its own state folder.

    python benchmarks/start_bench.py --before /tmp/before/src [--memories 10000]
        [--standing 0.5] [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def build(root: Path, n: int, share: float) -> None:
    """``n`` memories: ``share`` of them preferences or feedback, a tenth of those by hand."""
    from memdir import MemoryStore
    from memdir.config import Config
    from memdir.memory import Memory
    from memdir.plan import Put

    rng = random.Random(7)
    store = MemoryStore(root, Config(dir=root, embedder="none"), create=True)
    puts, hand = [], []
    for i in range(n):
        standing = rng.random() < share
        kind = rng.choice(["user_preference", "feedback"]) if standing else "project_fact"
        text = f"Rule {i}: keep component {i} of the build {rng.choice(['fast', 'small'])}."
        mem = Memory(f"m-{i:05d}", kind, text[:80], text)
        (hand if standing and rng.random() < 0.1 else puts).append(mem)
    for at in range(0, len(puts), 1000):
        store.apply([Put(m) for m in puts[at : at + 1000]], source="cli")
    for mem in hand:
        (root / f"{mem.name}.md").write_text(
            f"---\nname: {mem.name}\ntype: {mem.type}\ndescription: {json.dumps(mem.description)}"
            "\n---\n"
            f"{mem.body}\n"
        )
    store.close()


def child(root: str, runs: int, n: int, share: float) -> None:
    """One process: the store built by this side's code, then the session-start text
    ``runs`` times after a warm-up; JSON timings."""
    from memdir import MemoryStore
    from memdir.config import Config
    from memdir.standing import session_start

    build(Path(root), n, share)
    config = Config(dir=Path(root), embedder="none")
    store = MemoryStore(root, config, watch=False)
    got = session_start(store, config)
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        again = session_start(store, config)
        times.append(time.perf_counter() - began)
    assert again.text == got.text
    print(json.dumps({"ms": [t * 1000 for t in times], "rules": len(got.names),
                      "waiting": got.waiting, "tokens": got.tokens}))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", help="the src folder of the code before (required)")
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--standing", type=float, default=0.5, help="share of a standing kind")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.runs, args.memories, args.standing)
        return
    if not args.before:
        ap.error("--before is required")
    sides = {"before": str(Path(args.before).resolve()), "now": str(HERE.parent / "src")}
    work = Path(tempfile.mkdtemp(prefix="memdir-start-bench-"))
    try:
        rows = {}
        for side, src in sides.items():
            env = {**os.environ, "PYTHONPATH": src, "XDG_STATE_HOME": str(work / side)}
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(work / side / "store" / ".memory"),
                 "--runs", str(args.runs), "--memories", str(args.memories),
                 "--standing", str(args.standing)],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            rows[side] = json.loads(out.stdout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"session start, {args.memories} memories, {args.standing:.0%} of a standing kind")
    print("| code | p50 ms | p95 ms | rules given | waiting | tokens |")
    print("|---|---:|---:|---:|---:|---:|")
    for side, row in rows.items():
        ms = sorted(row["ms"])
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        print(
            f"| {side} | {statistics.median(ms):.0f} | {p95:.0f} | {row['rules']} |"
            f" {row['waiting']} | {row['tokens']} |"
        )


if __name__ == "__main__":
    main()
