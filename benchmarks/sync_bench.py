"""The time of ``memdir sync`` in a 10,000-memory store, against plain git doing the same
transfer by hand, in one run.

Two machines share a bare remote on disk. For k changed memories (1 and 100):
- push side: ``memdir sync`` on the machine that changed them (commit with a message naming
  them, fetch, push), against ``git add -A && git commit && git push`` of the same changes
  in a clone of its own;
- pull side: ``memdir sync`` on the other machine (fetch, merge, history of what the merge
  changed, MEMORY.md rendered), against ``git pull --ff-only`` in a plain clone.
Each is the ``memdir`` command as a user runs it (a new process), median of ``--repeat`` runs.

    python benchmarks/sync_bench.py [--memories 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV = dict(
    os.environ,
    GIT_AUTHOR_NAME="bench",
    GIT_AUTHOR_EMAIL="bench@example.org",
    GIT_COMMITTER_NAME="bench",
    GIT_COMMITTER_EMAIL="bench@example.org",
)


def sh(cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(args, cwd=cwd, check=True, capture_output=True, env=env or ENV)


def memdir(store: Path, *args: str) -> float:
    began = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "memdir", "--dir", str(store), *args],
        check=True,
        capture_output=True,
        env=ENV,
    )
    return time.perf_counter() - began


def timed(cwd: Path, script: str) -> float:
    began = time.perf_counter()
    subprocess.run(["sh", "-c", script], cwd=cwd, check=True, capture_output=True, env=ENV)
    return time.perf_counter() - began


def change(store: Path, k: int, round_: int) -> None:
    """Change ``k`` memories the way memdir writes them (one operation)."""
    from memdir import MemoryStore
    from memdir.plan import Put

    s = MemoryStore(store)
    plan = []
    for i in range(k):
        mem = s.get(f"m{(round_ * 131 + i * 7) % len(s):05d}")
        plan.append(Put(mem.replace(body=mem.body + f"\nround {round_}")))
    s.apply(plan, source="bench")
    s.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from memdir import MemoryStore
    from memdir.memory import Memory
    from memdir.plan import Put

    tmp = Path(tempfile.mkdtemp())
    sh(tmp, "git", "init", "-q", "--bare", "-b", "main", "remote.git")
    a = tmp / "a"
    store = MemoryStore(a)
    batch = [
        Put(
            Memory(
                f"m{i:05d}",
                "project_fact",
                f"Fact number {i} about the build",
                f"The build step {i} runs with flag --opt-{i % 97}.",
            )
        )
        for i in range(args.memories)
    ]
    for i in range(0, len(batch), 1000):
        store.apply(batch[i : i + 1000], source="bench")
    store.close()
    memdir(a, "sync", "--init", str(tmp / "remote.git"))
    b = tmp / "b"  # the other machine: a clone, set up by memdir
    sh(tmp, "git", "clone", "-q", str(tmp / "remote.git"), str(b))
    memdir(b, "init", "--git")
    memdir(b, "sync")
    # the baseline: the same store in git without memdir, with a remote of its own
    sh(tmp, "git", "clone", "-q", "--bare", str(tmp / "remote.git"), str(tmp / "plain.git"))
    plain_push, plain_pull = tmp / "plain-push", tmp / "plain-pull"
    for path in (plain_push, plain_pull):
        sh(tmp, "git", "clone", "-q", str(tmp / "plain.git"), str(path))
    print(f"{args.memories} memories, bare remote on disk, median of {args.repeat} runs")
    print(f"{'changed':>8} {'side':>5} {'memdir sync':>12} {'plain git':>10} {'ratio':>6}")
    round_ = 0
    for k in (1, 100):
        rows: dict[str, list[float]] = {"push": [], "pull": [], "git push": [], "git pull": []}
        for _ in range(args.repeat):
            round_ += 1
            change(a, k, round_)
            rows["push"].append(memdir(a, "sync"))
            rows["pull"].append(memdir(b, "sync"))
            for i in range(k):  # the same edits, by hand
                f = plain_push / f"m{(round_ * 131 + i * 7) % args.memories:05d}.md"
                f.write_text(f.read_text() + f"round {round_} by hand\n")
            rows["git push"].append(
                timed(plain_push, "git add -A && git commit -qm change && git push -q origin main")
            )
            rows["git pull"].append(timed(plain_pull, "git pull -q --ff-only"))
        for side in ("push", "pull"):
            ours, base = statistics.median(rows[side]), statistics.median(rows["git " + side])
            print(f"{k:>8} {side:>5} {ours:>11.2f}s {base:>9.2f}s {ours / base:>5.1f}x")


if __name__ == "__main__":
    main()
