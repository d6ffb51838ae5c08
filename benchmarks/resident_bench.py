"""The prompt hook with the resident memdir: `memdir hook prompt` as Claude Code runs it (a new
process, the event on stdin), over a store of hand-written memories, embedded (hybrid search),
idle and with both cores busy.

Cases, each timed end to end from the host's side:
- baseline in the same run: the hook in its own process (`MEMDIR_RESIDENT=off`, today's path);
- the hook answered by a warm resident, no model (search chooses);
- the same with a memory model that answers in 5 s (the hook's budget 2 s, the model's wait
  `hook_model_wait` 0.5 of it): search's hits must go in without waiting past the budget;
- the first hook of all (no resident yet: it answers in its own process and starts one).

    python benchmarks/resident_bench.py [--memories 10000] [--runs 30] [--store DIR]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))
from store_bench import make_store  # noqa: E402

from fakeserver import FakeLLMServer, Scripted  # noqa: E402

QUESTIONS = [
    "which database index query flag for the release branch?",
    "how do we deploy to staging with docker and kubernetes?",  # (words the store holds:
    "what is the on-call alert policy for the feature flag?",  # the relevance floor lets
    # through only what holds the prompt's own terms or is close in meaning)
    "what did we decide about the Docker deploy to staging in May?",  # (a period: the best
    # 60 are read for the day each was said, memdir.find.periods)
]


def _burn(stop: float) -> None:
    while time.monotonic() < stop:
        pass


def timed(env: dict[str, str], cwd: Path, question: str) -> tuple[float, str]:
    event = json.dumps(
        {"prompt": question, "cwd": str(cwd), "hook_event_name": "UserPromptSubmit",
         "session_id": "bench"}
    )  # fmt: skip
    began = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "memdir", "hook", "prompt", "--host", "claude-code"],
        input=event, env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    took = time.monotonic() - began
    if r.returncode != 0 or "<relevant_memories>" not in r.stdout:
        raise SystemExit(f"the hook gave no block: {r.stderr} {r.stdout[:300]!r} ({question})")
    return took, r.stdout


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def resident_pid(env: dict[str, str]) -> int | None:
    run = Path(env["XDG_RUNTIME_DIR"]) / "memdir"
    for lock in run.glob("*.lock"):
        text = lock.read_text().strip()
        if text:
            try:
                os.kill(int(text), 0)
                return int(text)
            except ProcessLookupError:
                continue
    return None


def stop_residents(envs: list[dict[str, str]]) -> None:
    for env in envs:
        pid = resident_pid(env)
        if pid:
            os.kill(pid, signal.SIGTERM)


def warm_up(env: dict[str, str], cwd: Path) -> None:
    timed(env, cwd, QUESTIONS[0])  # starts the resident
    for _ in range(600):
        if resident_pid(env):
            break
        time.sleep(0.1)
    for _ in range(3):
        timed(env, cwd, QUESTIONS[0])  # the resident opens the stores once


def measure(label: str, env: dict[str, str], cwd: Path, runs: int, rows: list[str]) -> None:
    times = [timed(env, cwd, QUESTIONS[i % len(QUESTIONS)])[0] for i in range(runs)]
    rows.append(
        f"| {label} | {statistics.median(times) * 1000:.0f} ms | {pct(times, 0.95) * 1000:.0f} ms"
        f" | {max(times) * 1000:.0f} ms |"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--store", type=Path, help="Reuse (or make) the project here.")
    args = ap.parse_args()
    home = args.store or Path(tempfile.mkdtemp())
    project = home / "app"
    if not (project / ".memory").is_dir():
        make_store(project / ".memory", args.memories)
        (project / ".git").mkdir(exist_ok=True)
    run = Path(tempfile.mkdtemp())
    run.chmod(0o700)
    slow = FakeLLMServer().start()
    slow.handler = lambda req: Scripted(text='{"selected": ["memory-00001"]}', delay=5)
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMDIR_", "ANTHROPIC_", "OPENAI_"))
    }
    base.update(
        HOME=str(home), MEMDIR_USER_DIR="none", XDG_CONFIG_HOME=str(home / "cfg"),
        XDG_RUNTIME_DIR=str(run), MEMDIR_RESIDENT_IDLE="900",
    )  # fmt: skip
    began = time.monotonic()  # embedded as the hooks will see it (their home's state folder)
    subprocess.run(
        [sys.executable, "-m", "memdir", "--dir", str(project / ".memory"), "index"],
        env=base, check=True, capture_output=True,
    )  # fmt: skip
    print(f"(indexed and embedded {args.memories} memories in {time.monotonic() - began:.0f} s)")
    cold = {**base, "MEMDIR_RESIDENT": "off"}
    warm = dict(base)
    model = {
        **base, "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": slow.url,
        "MEMDIR_MAX_RETRIES": "0",
    }  # fmt: skip
    first: list[float] = []
    for i in range(3):  # the first hook of all: no resident yet, a new environment each time
        env = {**base, "MEMDIR_BENCH_FIRST": str(i)}
        first.append(timed(env, project, QUESTIONS[0])[0])
        for _ in range(600):
            if resident_pid(env):
                break
            time.sleep(0.1)
        stop_residents([env])
    warm_up(warm, project)
    warm_up(model, project)
    print(f"{args.memories:,} hand-written memories, embedded; hook_budget 2 s; runs {args.runs}")
    for busy in (False, True):
        rows = ["| case | p50 | p95 | max |", "|---|---:|---:|---:|"]
        burners = []
        if busy:
            stop = time.monotonic() + 3600
            burners = [mp.Process(target=_burn, args=(stop,)) for _ in range(2)]
            for b in burners:
                b.start()
        try:
            few = max(5, args.runs // 5)
            measure("baseline: the hook in its own process", cold, project, few, rows)
            measure("resident, warm, no model", warm, project, args.runs, rows)
            measure("resident, warm, a model that answers in 5 s", model, project, few, rows)
        finally:
            for b in burners:
                b.terminate()
        print("\nboth cores busy" if busy else "\nidle")
        print("\n".join(rows))
    print(
        f"\nthe first hook of all (answers in its own process, starts the resident):"
        f" median {statistics.median(first) * 1000:.0f} ms"
    )
    stop_residents([warm, model])
    slow.stop()


if __name__ == "__main__":
    main()
