"""How fast ``memdir ui`` answers on a 10,000-memory store, against the command line showing
the same thing, in one run.

The pages are asked through the app in-process (Starlette's test client: routing, the access
checks, the stores, Jinja2 rendering; no socket). The baseline is what a person types instead:
``memdir list`` and ``memdir search`` in a process of their own against the same store, and
``memdir history`` + ``memdir show`` for one memory. Medians of ``--repeat`` runs.

    python benchmarks/ui_bench.py [--memories 10000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    from starlette.testclient import TestClient

    from memdir import MemoryStore
    from memdir.config import load_config
    from memdir.memory import Memory
    from memdir.plan import Put
    from memdir.scopes import Scopes
    from memdir_ui.access import COOKIE, Access
    from memdir_ui.app import build_app

    tmp = Path(tempfile.mkdtemp())
    root = tmp / ".memory"
    store = MemoryStore(root)
    batch = [
        Put(
            Memory(f"m{i:05d}", "project_fact", f"Fact {i} about the build", f"flag --opt-{i % 97}")
        )
        for i in range(args.memories)
    ]
    for i in range(0, len(batch), 1000):
        store.apply(batch[i : i + 1000], source="bench")
    for body in ("v2", "v3"):
        store.write("m00042", type="project_fact", description="Fact 42 about the build", body=body)
    store.search("warm up")
    store.close()
    env = dict(os.environ, MEMDIR_USER_DIR="none")
    os.environ["MEMDIR_USER_DIR"] = "none"
    config = load_config({"dir": root})
    access = Access(8123)
    began = time.perf_counter()
    client = TestClient(
        build_app(Scopes(config, project=MemoryStore(root, config)), access),
        base_url="http://127.0.0.1:8123",
    )
    client.cookies.set(COOKIE, access.session)
    client.get("/memories")
    opened = (time.perf_counter() - began) * 1000

    def cli(*argv: str) -> Callable[[], object]:
        return lambda: subprocess.run(
            [sys.executable, "-m", "memdir", "--dir", str(root), *argv],
            check=True,
            capture_output=True,
            env=env,
        )

    rows = [
        ("memories, first page", lambda: client.get("/memories"), cli("list")),
        (
            "search",
            lambda: client.get("/memories?q=build+flag+opt-7"),
            cli("search", "build flag opt-7", "-k", "50"),
        ),
        (
            "one memory (versions, diff)",
            lambda: client.get("/memory/project/m00042?a=1&b=now"),
            cli("history", "m00042"),
        ),
        ("activity", lambda: client.get("/activity"), cli("log", "-n", "300")),
    ]
    print(f"{args.memories} memories; the app opened and served its first page in {opened:.0f} ms")
    print(f"{'page':<30} {'memdir ui':>10} {'command':>10}")
    for name, page, command in rows:
        assert page().status_code == 200  # type: ignore[attr-defined]
        print(f"{name:<30} {median_ms(page, args.repeat):>8.1f}ms {median_ms(command, 3):>8.0f}ms")


if __name__ == "__main__":
    main()
