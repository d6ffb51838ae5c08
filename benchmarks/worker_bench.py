"""What a library program leaves running: it opens eight fresh stores of 300 memories and
searches each once (each search hands its backlog to the background), with the MiniLM
embedder. Counted: the memdir processes it left behind, their peak memory together, and the
seconds until every store was embedded and none was left. With ``--before DIR``, the same
with another checkout's ``src`` (the code before a change), in the same run.

    python benchmarks/worker_bench.py [--stores 8] [--memories 300] [--before DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROGRAM = r"""
import sys
from pathlib import Path
from memdir import MemoryStore
from memdir.config import Config
for root in sys.argv[1:]:
    store = MemoryStore(Path(root), Config(dir=Path(root), embedder="minilm"))
    store.search("deploys")
"""


def workers(state_home: str) -> dict[int, int]:
    """The memdir processes of the user whose state folder is ``state_home``: their peak
    resident memory in kB."""
    found = {}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            env = Path(f"/proc/{pid}/environ").read_bytes()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if b"memdir" in cmd and f"XDG_STATE_HOME={state_home}".encode() in env:
            peak = next(
                (ln.split()[1] for ln in status.splitlines() if ln.startswith("VmHWM")), "0"
            )
            found[int(pid)] = int(peak)
    return found


def run(src: Path, stores: int, memories: int) -> tuple[int, float, float]:
    """How many processes were left, their summed peak memory (MB), and the seconds until
    they were gone."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        roots = []
        for n in range(stores):
            root = base / f"s{n}" / ".memory"
            root.mkdir(parents=True)
            for i in range(memories):
                (root / f"m-{i}.md").write_text(
                    f"---\nname: m-{i}\ntype: project_fact\ndescription: fact {i} of store {n}"
                    f"\n---\nStore {n} holds fact number {i} about deploys.\n"
                )
            roots.append(str(root))
        home = str(base / "state")
        env = {**os.environ, "PYTHONPATH": str(src), "XDG_STATE_HOME": home,
               "XDG_DATA_HOME": str(base / "data"), "MEMDIR_USER_DIR": "none"}  # fmt: skip
        began = time.monotonic()
        subprocess.run([sys.executable, "-c", PROGRAM, *roots], env=env, check=True)
        seen: dict[int, int] = {}
        while time.monotonic() - began < 600:
            now = workers(home)
            for pid, peak in now.items():
                seen[pid] = max(seen.get(pid, 0), peak)
            if not now:
                break
            time.sleep(0.2)
        return len(seen), sum(seen.values()) / 1024, time.monotonic() - began


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", type=int, default=8)
    ap.add_argument("--memories", type=int, default=300)
    ap.add_argument("--before", type=Path, help="a checkout whose src/ is the code before")
    args = ap.parse_args()
    here = Path(__file__).resolve().parents[1] / "src"
    arms = [("memdir", here)] + ([("before", args.before / "src")] if args.before else [])
    print(f"{args.stores} fresh stores of {args.memories} memories, each searched once")
    print(f"{'arm':<10}{'processes left':>16}{'peak memory, all':>20}{'until all gone':>18}")
    for name, src in arms:
        count, mb, seconds = run(src, args.stores, args.memories)
        print(f"{name:<10}{count:>16}{mb:>17.0f} MB{seconds:>16.1f} s")


if __name__ == "__main__":
    main()
