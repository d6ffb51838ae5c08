"""The prompt hook, where every prompt waits: `memdir hook prompt` as Claude Code runs it
(a new process, the event on stdin), timed end to end, idle and with both cores busy.

Cases: no model (search chooses); a memory model that answers at once; one that never answers
(the hook must answer from search within ``hook_budget``); a 5 MB prompt; with ``--episodes
N``, search in a store that also keeps N turns of earlier conversations (embedded, as
extraction leaves them). The baseline in the same run is the cost of the process itself:
`memdir --version`. Medians of --runs.

    python benchmarks/hook_bench.py [--memories 2000] [--runs 5] [--episodes 20000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fakeserver import FakeLLMServer, Scripted, reply


def _burn(stop: float) -> None:
    while time.monotonic() < stop:
        pass


def timed(args: list[str], env: dict[str, str], payload: str | None, cwd: Path) -> float:
    began = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "memdir", *args],
        input=payload,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if r.returncode != 0:
        raise SystemExit(f"{args}: {r.stderr}")
    return time.monotonic() - began


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--episodes", type=int, default=0, help="Turns kept in a second project.")
    args = ap.parse_args()
    from memdir import MemoryStore
    from memdir.memory import Memory
    from memdir.plan import Put

    home = Path(tempfile.mkdtemp())
    project = home / "app"
    kept = home / "talked"  # the same memories, and what was said in N turns
    for where in [project] + ([kept] if args.episodes else []):
        store = MemoryStore(where / ".memory")
        store.apply(
            [
                Put(
                    Memory(
                        f"note-{i}",
                        "project_fact",
                        f"Note {i} about topic {i % 97}",
                        f"Details of note {i}: deploys, tests and topic {i % 97}.",
                    )
                )
                for i in range(args.memories)
            ]
        )
        store.index.embed_all()  # as after 'memdir index' or the first searches
    if args.episodes:
        from memdir.learn.conversation import embed_episodes, keep_episodes

        store = MemoryStore(kept / ".memory")
        words = "deploy tests release migration staging database pipeline review".split()
        for c in range(args.episodes // 50):  # conversations of 50 turns
            talk = [
                {
                    "role": "user" if t % 2 == 0 else "assistant",
                    "content": f"Conversation {c}, turn {t}: about {words[(c + t) % 8]} and"
                    f" topic {(c * 7 + t) % 97}; we agreed on option {t % 5}.",
                }
                for t in range(100)
            ]
            keep_episodes(store, talk, f"2026-{1 + c % 12:02d}-{1 + c % 28:02d}T10:00:00Z")
        embed_episodes(store)
    fast, slow = FakeLLMServer().start(), FakeLLMServer().start()
    fast.handler = lambda req: reply('{"selected": ["note-5"]}')
    slow.handler = lambda req: Scripted(text='{"selected": []}', delay=600)
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMDIR_", "ANTHROPIC_", "OPENAI_"))
    }
    base.update(HOME=str(home), MEMDIR_USER_DIR="none", XDG_CONFIG_HOME=str(home / "cfg"))
    envs = {
        "no model (search)": base,
        "model answers": {**base, "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fast.url},
        "model never answers": {
            **base,
            "ANTHROPIC_API_KEY": "k",
            "ANTHROPIC_BASE_URL": slow.url,
            "MEMDIR_MAX_RETRIES": "0",
        },
    }

    def event(prompt: str) -> str:
        return json.dumps(
            {"prompt": prompt, "cwd": str(project), "hook_event_name": "UserPromptSubmit"}
        )

    cases = [
        (name, env, event("how do we run the tests for topic 5?")) for name, env in envs.items()
    ]
    cases.append(("5 MB prompt, no model", base, event("x " * 2_500_000 + "topic 5 tests?")))
    if args.episodes:
        cases.append(
            (
                f"no model (search), {args.episodes:,} turns kept",
                base,
                event("how do we run the tests for topic 5?").replace(str(project), str(kept)),
            )
        )
    print(f"{args.memories} memories, hook_budget 2 s (the default), medians of {args.runs}")
    print("| case | idle | both cores busy |")
    print("|---|---:|---:|")
    rows: dict[str, list[float]] = {}
    for load in (False, True):
        burners: list[mp.Process] = []
        if load:
            stop = time.monotonic() + 3600
            burners = [mp.Process(target=_burn, args=(stop,), daemon=True) for _ in range(2)]
            for b in burners:
                b.start()
        try:
            baseline = statistics.median(
                timed(["--version"], base, None, project) for _ in range(args.runs)
            )
            rows.setdefault("baseline: `memdir --version`", []).append(baseline)
            for name, env, payload in cases:
                rows.setdefault(name, []).append(
                    statistics.median(
                        timed(["hook", "prompt", "--host", "claude-code"], env, payload, project)
                        for _ in range(args.runs)
                    )
                )
        finally:
            for b in burners:
                b.terminate()
    for name, (idle, busy) in rows.items():
        print(f"| {name} | {idle:.2f} s | {busy:.2f} s |")
    fast.stop()
    slow.stop()


if __name__ == "__main__":
    main()
