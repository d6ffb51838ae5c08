"""Amended decisions, through the hooks a host calls and with no memory model: a project chat
makes a decision, weeks of unrelated chats follow (MemoryCode's workplace sessions, odd-numbered
dialogues only), a later chat amends the decision ("actually, from now on…"), more chats
follow; then a bug report that hinges on the decision is sent to ``memdir hook prompt``.
Scored: whether recall injects the amending chat, and whether it injects the superseded one
as current (an episode that still says the old decision and is not marked replaced).

Every chat is learned with ``memdir hook learn`` with no memory model configured: what is kept
is the conversation's turns, and only memdir's own rules can tell that one replaced another.
The scenarios are written here; those with an even index are the half the rules were tuned on,
the odd ones the half that checks them (reported apart).

    python benchmarks/decisions_bench.py --data PATH/TO/MemoryCode/dataset
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from coding_memory_bench import environment, interval, turns

# (decision said, its reply, amendment said, its reply, bug report, a phrase only the decision
# has, a phrase the amendment's form of the answer has)
SCENARIOS = [
    (
        "We settled on Redis for the session cache in the auth service; keep TTLs at 30 minutes.",
        "Got it: Redis for auth sessions, 30-minute TTL.",
        "Actually, from now on the auth service session cache uses Memcached instead of Redis,"
        " with a 15 minute TTL.",
        "Understood, Memcached for auth sessions.",
        "Users get logged out of the auth service after 15 minutes and sessions vanish from the"
        " session cache. Which cache backend should the auth service use and what TTL?",
        "keep TTLs at 30 minutes",
        "Memcached",
    ),
    (
        "Decision: the billing worker retries failed charges 3 times with exponential backoff.",
        "Okay, 3 retries with exponential backoff in the billing worker.",
        "We changed our mind on billing worker retries: no retries for failed charges any more,"
        " send them to the manual review queue instead.",
        "Noted: failed charges go to manual review, no retries.",
        "A customer was charged twice after the billing worker hit a failed charge. How should"
        " the billing worker handle failed charges?",
        "3 times with exponential backoff",
        "manual review queue",
    ),
    (
        "For the mobile app API we agreed on API versioning in the URL path, like /v2/orders.",
        "Right, versions go in the URL path.",
        "Going forward the mobile app API puts API versioning in an Accept header instead of"
        " the URL path.",
        "Okay, versioning moves to the Accept header.",
        "The mobile app API returns 404 for /v3/orders after the deploy. Where should the API"
        " version go in mobile app API requests?",
        "like /v2/orders",
        "Accept header",
    ),
    (
        "Let's use UTC timestamps stored as ISO strings in the events table of the analytics"
        " pipeline.",
        "Fine: ISO strings in UTC for analytics events.",
        "Update: the analytics pipeline events table stores timestamps as integer epoch"
        " milliseconds from now on, not ISO strings.",
        "Got it, epoch milliseconds in the events table.",
        "Dashboards show events in the analytics pipeline sorted wrongly and the events table"
        " timestamps fail to parse. What format do events table timestamps use?",
        "stored as ISO strings",
        "epoch milliseconds",
    ),
    (
        "Our rule for the search service: log every query at INFO level with the user id.",
        "Understood, INFO logs with user ids for search queries.",
        "On second thought, the search service must not log the user id with queries any more;"
        " log search queries at DEBUG level only, without user ids.",
        "Okay: DEBUG level, no user ids.",
        "Privacy review flagged search service logs: what should the search service log for"
        " each query, and at which level?",
        "at INFO level with the user id",
        "DEBUG level",
    ),
    (
        "We decided the frontend build uses webpack with a single vendor bundle.",
        "Webpack, one vendor bundle: noted.",
        "We switched the frontend build over to Vite; split vendor code per route instead of a"
        " single vendor bundle.",
        "Vite with per-route vendor chunks, got it.",
        "The frontend build output is one huge vendor bundle and pages load slowly. Which tool"
        " does the frontend build use and how is vendor code split?",
        "webpack with a single vendor bundle",
        "Vite",
    ),
    (
        "The payments service must round currency amounts half-up to two decimals.",
        "Half-up rounding to two decimals in payments.",
        "Actually the payments service rounds currency amounts with banker's rounding (half to"
        " even) now, replacing half-up.",
        "Banker's rounding in payments from now on.",
        "Finance found one-cent differences in payments service totals. How should the payments"
        " service round currency amounts?",
        "half-up to two decimals",
        "half to even",
    ),
    (
        "For the CLI we picked click for argument parsing in the deploy tool.",
        "click for the deploy tool's arguments.",
        "From now on the deploy tool CLI uses argparse for argument parsing instead of click, to"
        " drop the dependency.",
        "argparse it is for the deploy tool.",
        "Installing the deploy tool fails on a missing dependency for argument parsing. Which"
        " library does the deploy tool CLI use for argument parsing?",
        "picked click for argument parsing",
        "argparse",
    ),
    (
        "Team convention: feature flags for the checkout flow live in LaunchDarkly.",
        "Checkout feature flags in LaunchDarkly, noted.",
        "We're replacing LaunchDarkly: checkout flow feature flags now live in a flags.yaml file"
        " in the repo.",
        "Checkout flags move to flags.yaml.",
        "A checkout flow feature flag toggled yesterday did nothing in production. Where do"
        " checkout flow feature flags live?",
        "live in LaunchDarkly",
        "flags.yaml",
    ),
    (
        "We'll use PostgreSQL 14 for the reporting database and nightly pg_dump backups.",
        "PostgreSQL 14 with nightly pg_dump for reporting.",
        "Change of plan for the reporting database: move to PostgreSQL 16 and replace nightly"
        " pg_dump backups with continuous WAL archiving.",
        "PostgreSQL 16 with WAL archiving for reporting.",
        "Restoring the reporting database lost a day of data. Which PostgreSQL version and"
        " backup method does the reporting database use?",
        "nightly pg_dump backups.",
        "WAL archiving",
    ),
    (
        "The image service should resize uploads to a maximum of 2048 pixels wide as JPEG.",
        "2048px max width, JPEG, for uploads.",
        "Going forward the image service converts uploads to WebP at a maximum of 1600 pixels"
        " wide instead of JPEG at 2048.",
        "WebP at 1600px for uploads.",
        "Uploaded photos from the image service look blurry and are JPEG files. What size and"
        " format should the image service produce for uploads?",
        "2048 pixels wide as JPEG",
        "WebP",
    ),
    (
        "Agreed: the notification service sends emails through SendGrid.",
        "SendGrid for notification emails.",
        "No longer SendGrid: the notification service sends emails through Amazon SES from now on.",
        "Amazon SES for notification emails.",
        "Notification service emails bounce with an authentication error. Which provider does"
        " the notification service send emails through?",
        "emails through SendGrid.",
        "Amazon SES",
    ),
]
FILLERS = 140


def fillers(data: Path, count: int, rng: random.Random) -> list[list[dict[str, str]]]:
    """Unrelated chats: MemoryCode's sessions that hold only workplace topics (odd-numbered
    dialogues), as user and assistant turns."""
    chats: list[list[dict[str, str]]] = []
    for path in sorted(data.glob("dialogue_*.json")):
        if int(path.stem.split("_")[1]) % 2 == 0:
            continue  # held out
        dialogue = json.loads(path.read_text(encoding="utf-8"))
        mentor = dialogue["context"]["mentor"]
        for session in dialogue["sessions"]:
            if all(k.startswith("filler") for k in session["type"]):
                chats.append(turns(session, mentor))
    rng.shuffle(chats)
    return chats[:count]


def run(
    scenario: tuple[str, ...], chats: list[list[dict[str, str]]], base: Path
) -> tuple[str, int]:
    """Learn the decision, the unrelated chats and the amendment through the hooks; the
    prompt hook's block for the bug report, and how many kept turns were marked replaced."""
    from memdir.integrations import hooks

    decided, reply, amended, reply2, report, _, _ = scenario
    project = base / "project"
    (project / ".memory").mkdir(parents=True)
    sequence = [
        *chats[:20],
        [{"role": "user", "content": decided}, {"role": "assistant", "content": reply}],
        *chats[20:120],
        [{"role": "user", "content": amended}, {"role": "assistant", "content": reply2}],
        *chats[120:],
    ]
    for i, chat in enumerate(sequence):
        transcript = base / f"s{i}.jsonl"
        transcript.write_text(
            "".join(json.dumps({"type": t["role"], "message": t}) + "\n" for t in chat),
            encoding="utf-8",
        )
        event = {"hook_event_name": "Stop", "session_id": f"s{i}", "cwd": str(project),
                 "transcript_path": str(transcript)}  # fmt: skip
        _, err = hooks.run("learn", "claude-code", json.dumps(event), worker=_inline)
        if err:
            raise SystemExit(err)
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "bug", "cwd": str(project),
              "prompt": report}  # fmt: skip
    out, err = hooks.run("prompt", "claude-code", json.dumps(prompt))
    if err:
        raise SystemExit(err)
    marked = sum(
        line.count('"held": "replaced by')
        for p in (base / "state").rglob("episodes/*.jsonl")
        for line in p.read_text(encoding="utf-8").splitlines()
    )
    block = str(json.loads(out)["hookSpecificOutput"]["additionalContext"]) if out else ""
    return block, marked


def _inline(state: Path, config: Any) -> None:
    from memdir import jobs
    from memdir.integrations import workerjobs

    jobs.work(state, workerjobs.job_handlers(config))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="MemoryCode's dataset/ folder")
    args = parser.parse_args()
    rng = random.Random(7)
    chats = fillers(args.data, FILLERS, rng)
    began = time.perf_counter()
    from memdir.episodes import Episodes

    amend = Episodes.amend
    rows: dict[tuple[str, str], list[tuple[bool, bool]]] = {}
    for arm in ("memdir", "baseline"):  # the baseline: every turn kept, none replaced
        Episodes.amend = amend if arm == "memdir" else (lambda self, refs: [])  # type: ignore[method-assign]
        for i, scenario in enumerate(SCENARIOS):
            with tempfile.TemporaryDirectory() as tmp, environment(Path(tmp), None):
                for var in ("MEMDIR_PROVIDER", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
                    os.environ.pop(var, None)
                os.environ["PATH"] = f"{Path(sys.executable).parent}:/usr/bin:/bin"  # no CLI
                block, marked = run(scenario, chats, Path(tmp))
            old, new = scenario[5], scenario[6]
            later = new.lower() in block.lower()
            stale = old.lower() in block.lower()
            rows.setdefault((arm, "tuned" if i % 2 == 0 else "held"), []).append((later, stale))
            print(f"{arm} scenario {i:2d}: later form {'recalled' if later else 'MISSING'},"
                  f" superseded {'SHOWN' if stale else 'not shown'},"
                  f" {marked} turn(s) marked replaced", flush=True)  # fmt: skip
    Episodes.amend = amend  # type: ignore[method-assign]
    print(f"\n{'arm':<10}{'half':<8}{'later recalled':>16}{'95% interval':>20}"
          f"{'superseded shown':>18}")  # fmt: skip
    for (arm, half), got in rows.items():
        k = sum(later for later, _ in got)
        bad = sum(stale for _, stale in got)
        print(f"{arm:<10}{half:<8}{f'{k}/{len(got)}':>16}{interval(k, len(got)):>20}"
              f"{f'{bad}/{len(got)}':>18}")  # fmt: skip
    print(f"{time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
