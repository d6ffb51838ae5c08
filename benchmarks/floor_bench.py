"""The relevance floor: how often recall injects memories for a prompt the store cannot
answer, and what the floor costs on questions it can answer.

Stores: each LoCoMo DEV conversation (0–4) kept as memory files (observations, and raw
turns), searched through `MemoryStore.search` as recall does (hybrid with MiniLM when
`memdir[embed]` is installed). Unanswerable: ordinary coding prompts asked of those personal
stores (20 written for tuning, 20 kept out, and 20 more kept out that were written after the
floor was chosen), and the conversations' questions asked of another conversation's store
(LoCoMo's DEV set holds none of its unanswerable category). Answerable: the conversations'
own questions; "kept" is how many of those whose evidence search put in the top 5 still
have it after the floor. Choose on conversations 0–1, confirm on 2–4 (`--convs`). Bootstrap
95% intervals over prompts.

    python benchmarks/floor_bench.py [--variant observations|turns] [--convs 0,1] [--show]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path
from typing import Any

from memdir.config import Config
from memdir.memory import Memory, dumps
from memdir.recall.choose import floor, unknown_names
from memdir.scopes import Scopes
from memdir.store import MemoryStore

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT.parent / "shared" / "bench" / "locomo"

CODING_TUNE = [
    "set up pre-commit with ruff and black",
    "why does pytest say fixture 'client' not found?",
    "add a GitHub Actions workflow that runs the tests on every push",
    "refactor the database layer to use SQLAlchemy 2.0 sessions",
    "write a Dockerfile for this FastAPI app",
    "how do I squash the last three commits?",
    "the build fails with 'ModuleNotFoundError: No module named yaml'",
    "add type hints to utils.py and make mypy pass",
    "rename the package from foo to foobar everywhere",
    "make the CLI print a progress bar while it downloads",
    "bump the minimum Python version to 3.11 in pyproject.toml",
    "write unit tests for the parse_date function",
    "why is this regex not matching multi-line strings?",
    "configure logging to write JSON lines to stderr",
    "add a --dry-run flag to the deploy script",
    "fix the flaky test in test_scheduler.py",
    "explain what this segfault in the C extension means",
    "convert the setup.py to a pyproject.toml with hatchling",
    "cache the HTTP responses for an hour with requests-cache",
    "add pagination to the /users endpoint",
]
CODING_HELD_OUT = [
    "migrate the Makefile targets to a justfile",
    "the Rust build fails with linker error cc not found",
    "add an index on orders.created_at and write the migration",
    "how do I profile memory usage of this Python script?",
    "set up eslint and prettier for the frontend folder",
    "write a bash script that rotates the log files daily",
    "make the API return 404 instead of 500 for a missing user",
    "why does git say detached HEAD after checkout?",
    "add retries with exponential backoff to the HTTP client",
    "split the monolithic views.py into modules",
    "enable strict mode in tsconfig and fix the errors",
    "generate OpenAPI docs for the Flask routes",
    "the Docker image is 2 GB, make it smaller",
    "replace print statements with the logging module",
    "write a GitHub issue template for bug reports",
    "speed up the CSV import, it takes ten minutes",
    "add a health check endpoint for Kubernetes",
    "port the tests from unittest to pytest",
    "set up Dependabot for pip and npm",
    "fix the timezone bug in the nightly report",
]

# Written after the floor was chosen and first confirmed (2026-12-04); never tuned on.
CODING_HELD_OUT_2 = [
    "add a pre-push hook that runs the linter",
    "why does npm install fail with ERESOLVE unable to resolve dependency tree?",
    "write a SQL query for the top ten customers by revenue last quarter",
    "turn on gzip compression in the nginx config",
    "the Go tests hang on CI but pass locally",
    "add a unique constraint on users.email without downtime",
    "how do I mock datetime.now in a test?",
    "set the Java heap size for the Gradle daemon",
    "make the React component re-render when the prop changes",
    "rebase my branch onto main and keep the merge commits",
    "add Sentry error reporting to the Django app",
    "the Celery worker leaks memory after a few hours",
    "write a Terraform module for an S3 bucket with versioning",
    "convert these callbacks to async/await",
    "add a CONTRIBUTING.md with the release steps",
    "why is the Postgres query doing a sequential scan?",
    "pin the Node version with .nvmrc and check it in CI",
    "add a rate limiter to the login endpoint",
    "generate a changelog from the conventional commits",
    "fix the race condition in the cache invalidation",
]


def build(memories: list[dict[str, Any]], folder: Path) -> MemoryStore:
    folder.mkdir(parents=True)
    for i, m in enumerate(memories):
        text = m["text"]
        mem = Memory(f"m{i:05d}", "project_fact", text[:150].replace("\n", " "), text)
        (folder / f"m{i:05d}.md").write_text(dumps(mem))  # as a person's files hold them
    store = MemoryStore(folder, Config(dir=folder))
    store.index.embed_all()
    return store


def boot(values: list[float], runs: int = 1000) -> tuple[float, float]:
    rnd = random.Random(7)
    means = sorted(sum(rnd.choice(values) for _ in values) / len(values) for _ in range(runs))
    return means[int(0.025 * runs)], means[int(0.975 * runs) - 1]


def rate(values: list[float]) -> str:
    if not values:
        return "—"
    lo, hi = boot(values)
    return f"{sum(values) / len(values):.2f} [{lo:.2f}, {hi:.2f}] (n={len(values)})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", default="observations", choices=("observations", "turns"))
    ap.add_argument("--convs", default="0,1")
    ap.add_argument("--show", action="store_true", help="what each tuning prompt injected")
    args = ap.parse_args()
    data = json.loads((BENCH / f"{args.variant}_dev.json").read_text(encoding="utf-8"))
    convs = [int(c) for c in args.convs.split(",")]
    rows: dict[str, list[float]] = {k: [] for k in (
        "coding_tune", "coding_held", "coding_held_2", "other_conv", "kept", "answerable_silent"
    )}  # fmt: skip
    base: dict[str, list[float]] = {k: [] for k in rows}
    with tempfile.TemporaryDirectory() as tmp:
        for conv in convs:
            mems = [m for m in data["memories"] if m["conv"] == conv]
            ref_of = {f"m{i:05d}": m["id"] for i, m in enumerate(mems)}
            store = build(mems, Path(tmp) / f"c{conv}" / ".memory")
            scopes = Scopes.of(store)
            other = [q for q in data["queries"] if q["conv"] != conv and q["category"] != 5]
            own = [q for q in data["queries"] if q["conv"] == conv and q["category"] != 5]
            for key, prompts in (
                ("coding_tune", CODING_TUNE),
                ("coding_held", CODING_HELD_OUT),
                ("coding_held_2", CODING_HELD_OUT_2),
                ("other_conv", [q["question"] for q in other[:40]]),
            ):
                for p in prompts:
                    hits = store.search(p, 5)
                    kept = floor(hits, p, unknown_names(scopes, p))
                    base[key].append(float(bool(hits)))
                    rows[key].append(float(bool(kept)))
                    if args.show and key in ("coding_tune", "coding_held") and kept:
                        print(f"c{conv} {key}: {p!r} ->", [
                            (h.name, round(h.score, 2), h.close) for h in kept
                        ])  # fmt: skip
            for q in own:
                hits = store.search(q["question"], 5)
                found = [h for h in hits if ref_of[h.name] in q["relevant"]]
                if not found:
                    continue
                kept = floor(hits, q["question"], unknown_names(scopes, q["question"]))
                rows["kept"].append(float(any(h in kept for h in found)))
                rows["answerable_silent"].append(float(not kept))
                base["kept"].append(1.0)
                base["answerable_silent"].append(0.0)
            store.close()
    print(f"variant {args.variant}, conversations {args.convs}")
    print("| measure | without the floor | with the floor |")
    print("|---|---|---|")
    names = {
        "coding_tune": "false injections, coding prompts (tuning set)",
        "coding_held": "false injections, coding prompts (kept out)",
        "coding_held_2": "false injections, coding prompts (kept out, second set)",
        "other_conv": "false injections, another conversation's questions",
        "kept": "answerable with evidence in the top 5: evidence still injected",
        "answerable_silent": "answerable with evidence in the top 5: nothing injected",
    }
    for key, label in names.items():
        print(f"| {label} | {rate(base[key])} | {rate(rows[key])} |")


if __name__ == "__main__":
    main()
