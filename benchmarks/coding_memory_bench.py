"""Coding conventions over a long project, through the hooks a host calls: MemoryCode's
dialogues (a mentor gives coding conventions across 20-50 sessions, some later updated,
between unrelated topics), each session written as a Claude Code session file and learned with
``memdir hook learn`` (its job run by the store's worker code in this process), then a new
session started with ``memdir hook start``. Scored: how many of the latest conventions stand
at that session start, how many superseded versions still show, and how much chit-chat stands
as a rule. With ``--write-code URL`` a model at that OpenAI-compatible address then writes the
dialogue's final evaluation tasks (MemoryCode's ``history_eval_query``) three ways — given
nothing, given memdir's session start, given the whole history in its context — and each answer
is graded by MemoryCode's own regex evaluator (``code/evaluate_model_output.py`` beside the
dataset), as its paper grades the history setting.

Arms: ``perfect`` — a scripted model server hands memdir exactly each session's instructions
(what memdir's own landing, standing and budget keep of a flawless extraction); ``model`` — the
model configured by ``MEMDIR_PROVIDER``/``OPENAI_BASE_URL`` extracts (the local model:
``../shared/local-llm``); the no-memory baseline keeps nothing, so its share is 0 by
construction and printed for the table.

Only the odd-numbered dialogues are read: the even-numbered ones are held out.

    python benchmarks/coding_memory_bench.py --data PATH/TO/MemoryCode/dataset
    python benchmarks/coding_memory_bench.py --data … --arm model --limit 2   # local model
    python benchmarks/coding_memory_bench.py --data … --dialogues 211,231 \
        --write-code http://127.0.0.1:8088/v1                        # the code it writes
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import types
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SPEAKER = re.compile(r"^([A-Z][\w .'-]{0,40}):\s*(.*)$")


def dialogues(data: Path, low: int, high: int) -> list[tuple[int, dict[str, Any]]]:
    """The odd-numbered dialogues of ``low`` to ``high`` sessions, by number."""
    out = []
    for path in sorted(data.glob("dialogue_*.json"), key=lambda p: int(p.stem.split("_")[1])):
        number = int(path.stem.split("_")[1])
        if number % 2 == 0:
            continue  # held out
        dialogue = json.loads(path.read_text(encoding="utf-8"))
        if low <= len(dialogue["sessions"]) <= high:
            out.append((number, dialogue))
    return out


def turns(session: dict[str, Any], mentor: str) -> list[dict[str, str]]:
    """A session's text as user (the mentor) and assistant (the mentee) messages."""
    out: list[dict[str, str]] = []
    for line in session["text"].splitlines():
        m = SPEAKER.match(line.strip())
        if m:
            role = "user" if m.group(1).strip() == mentor else "assistant"
            out.append({"role": role, "content": m.group(2)})
        elif line.strip() and out:
            out[-1]["content"] += "\n" + line.strip()
    return out


def instructions(dialogue: dict[str, Any]) -> tuple[dict[int, list[str]], list[list[str]]]:
    """Each coding instruction's versions in order (by its pivot), and each session's
    instruction texts (coding and workplace)."""
    versions: dict[int, list[str]] = {}
    per_session: list[list[str]] = []
    for i, session in enumerate(dialogue["sessions"]):
        pivots = [p for p in dialogue["instructions"][i] if p != -1]
        coding = [
            t
            for t, k in zip(session["topic"], session["type"], strict=True)
            if k.startswith("instr")
        ]
        for (pivot, _), text in zip(pivots, coding, strict=False):
            versions.setdefault(pivot, []).append(text)
        per_session.append(
            [
                t
                for t, k in zip(session["topic"], session["type"], strict=True)
                if "instruction" in k
            ]
        )
    return versions, per_session


class Perfect:
    """An OpenAI-compatible server that answers each extraction with the current session's
    instructions exactly (facts for the facts prompt, memories for the other) and each
    consolidation with nothing to do."""

    def __init__(self) -> None:
        self.current: list[str] = []
        self.calls = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                outer.calls += 1
                text = json.dumps(outer.answer(request))
                body = json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": request.get("model", "perfect"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": text},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        system = " ".join(
            str(m.get("content")) for m in request.get("messages", []) if m["role"] == "system"
        )
        if "consolidat" in system.lower() or "merge" in system.lower():
            return {"merge": [], "retire": []}
        if "facts" in system:
            return {"facts": list(self.current)}
        return {
            "memories": [
                {"action": "create", "name": "", "type": "feedback", "description": t, "body": t}
                for t in self.current
            ]
        }


@contextlib.contextmanager
def environment(home: Path, base_url: str | None) -> Iterator[None]:
    """A fresh user for one dialogue: its own state, data and configuration folders."""
    keep = dict(os.environ)
    os.environ.update(
        XDG_STATE_HOME=str(home / "state"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_CACHE_HOME=str(home / "cache"),
        MEMDIR_EMBEDDER="none",
        MEMDIR_RESIDENT="off",
    )
    if base_url is not None:
        os.environ.update(MEMDIR_PROVIDER="openai", OPENAI_BASE_URL=base_url, OPENAI_API_KEY="x")
        os.environ.pop("MEMDIR_MODEL", None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(keep)


def run_dialogue(dialogue: dict[str, Any], perfect: Perfect | None, base: Path) -> dict[str, Any]:
    """Learn every session through the hooks, start a new one; what stood there."""
    from memdir import jobs
    from memdir.integrations import hooks, workerjobs

    project = base / "project"
    (project / ".memory").mkdir(parents=True)
    mentor = dialogue["context"]["mentor"]
    versions, per_session = instructions(dialogue)

    def worker(state: Path, config: Any) -> None:
        jobs.work(state, workerjobs.job_handlers(config))

    errors = []
    for i, session in enumerate(dialogue["sessions"]):
        if perfect is not None:
            perfect.current = per_session[i]
        transcript = base / f"session-{i}.jsonl"
        transcript.write_text(
            "".join(
                json.dumps({"type": t["role"], "message": t}) + "\n" for t in turns(session, mentor)
            ),
            encoding="utf-8",
        )
        event = {
            "hook_event_name": "Stop",
            "session_id": f"s{i}",
            "cwd": str(project),
            "transcript_path": str(transcript),
        }
        _, err = hooks.run("learn", "claude-code", json.dumps(event), worker=worker)
        if err:
            errors.append(err)
    start = {"hook_event_name": "SessionStart", "session_id": "next", "cwd": str(project)}
    shown, err = hooks.run("start", "claude-code", json.dumps(start))
    text = json.loads(shown)["hookSpecificOutput"]["additionalContext"] if shown else ""
    rules = text.split("<memory_index>")[0].lower()
    latest = [v[-1] for v in versions.values()]
    stale = [
        old
        for v in versions.values()
        if len(v) > 1
        for old in v[:-1]
        if old.lower() != v[-1].lower()
    ]
    fillers = [
        t
        for s in dialogue["sessions"]
        for t, k in zip(s["topic"], s["type"], strict=True)
        if k in ("filler-add", "filler-update")
    ]
    return {
        "latest": len(latest),
        "stand": sum(t.lower() in rules for t in latest),
        "updated": sum(len(v) > 1 for v in versions.values()),
        "stale": sum(t.lower() in rules for t in stale),
        "chit_chat": sum(t.lower() in rules for t in fillers),
        "tokens": math.ceil(len(text) / 4),
        "errors": errors + ([err] if err else []),
        "context": text,
    }


TASK = (
    "Based on information provided, write a {query}. Do not provide example usage. You must"
    " follow all the latest coding guidelines provided by your mentor, including any possible"
    " updates."
)


def code_prompts(dialogue: dict[str, Any], context: str) -> dict[str, list[list[dict[str, str]]]]:
    """Each final evaluation task as MemoryCode asks it with no dialogue and with the whole
    history, and with memdir's session start where the history would be."""
    who = dialogue["context"]
    style = (
        "## Style Guide\nDo not acknowledge. Only generate Python code and nothing else before or"
        " after. Do not explain the code. Do not ask for more information but directly give the"
        " answer."
    )
    mentee = (
        f"## Task and Context\nYou are {who['mentee']}, a new software engineer at"
        f" {who['company']}. Your mentor {who['mentor']} has given you specific coding guidelines"
        f" that you must follow.\n\n{style}"
    )
    history = "".join(
        f"\n\n Session {i} \n\n" + s["text"] for i, s in enumerate(dialogue["sessions"])
    )
    queries = dialogue["sessions"][-1]["history_eval_query"]
    thread = f"This is a thread of dialogues between you and your mentor {who['mentor']}:\n"
    memory = f"This is what your memory holds from your work with your mentor {who['mentor']}:\n"
    return {
        "none": [
            [
                {"role": "system", "content": style},
                {"role": "user", "content": f"Write a {q}. Do not provide example usage."},
            ]
            for q in queries
        ],
        "memdir": [
            [
                {"role": "system", "content": mentee},
                {"role": "user", "content": memory + context + "\n" + TASK.format(query=q)},
            ]
            for q in queries
        ],
        "history": [
            [
                {"role": "system", "content": mentee},
                {"role": "user", "content": thread + history + " \n" + TASK.format(query=q)},
            ]
            for q in queries
        ],
    }


def complete(url: str, messages: list[dict[str, str]]) -> str:
    """The model's answer at temperature 0."""
    body = json.dumps(
        {"model": "m", "messages": messages, "temperature": 0, "max_tokens": 700}
    ).encode()
    request = urllib.request.Request(
        url.rstrip("/") + "/chat/completions", body, {"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=1800) as answer:
        return str(json.loads(answer.read())["choices"][0]["message"]["content"])


def evaluator(data: Path) -> Any:
    """MemoryCode's grading function, from the checkout the dataset came in."""
    sys.modules.setdefault("fire", types.ModuleType("fire"))  # its command line only
    sys.path.insert(0, str(data.parent / "code"))
    import evaluate_model_output  # type: ignore[import-not-found]

    return evaluate_model_output.compute_score


def grade(score: Any, dialogue: dict[str, Any], outputs: list[str]) -> float:
    """MemoryCode's history score of one dialogue: per answer, the mean over the regexes that
    apply to it; then the mean over answers."""
    regexes = dialogue["sessions"][-1]["history_regex"]
    per_answer = []
    for output in outputs:
        marks = [score(output, kind, regex) for kind, regex in regexes]
        marks = [m for m in marks if m is not None]
        if marks:
            per_answer.append(statistics.fmean(marks))
    return statistics.fmean(per_answer) if per_answer else float("nan")


def write_code(
    url: str, score: Any, dialogue: dict[str, Any], context: str, arms: list[str]
) -> tuple[dict[str, float], dict[str, list[str]]]:
    """Each arm's score for the code the model writes, and the code."""
    prompts = code_prompts(dialogue, context)
    written = {arm: [complete(url, m) for m in prompts[arm]] for arm in arms}
    return {arm: grade(score, dialogue, code) for arm, code in written.items()}, written


def interval(k: int, n: int) -> str:
    """A 95% Wilson interval for k of n."""
    if n == 0:
        return "—"
    z, p = 1.96, k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return f"[{max(0.0, mid - half):.3f}, {min(1.0, mid + half):.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="MemoryCode's dataset/ folder")
    parser.add_argument("--arm", choices=("perfect", "model"), default="perfect")
    parser.add_argument("--min-sessions", type=int, default=20)
    parser.add_argument("--max-sessions", type=int, default=50)
    parser.add_argument("--limit", type=int, default=0, help="at most this many dialogues")
    parser.add_argument("--dialogues", default="", help="only these numbers, e.g. 211,231")
    parser.add_argument("--write-code", metavar="URL", help="a model that writes the tasks' code")
    parser.add_argument(
        "--code-arms", default="none,memdir,history", help="which of none, memdir, history"
    )
    parser.add_argument("--save", type=Path, help="a folder for each dialogue's code and start")
    args = parser.parse_args()
    chosen = dialogues(args.data, args.min_sessions, args.max_sessions)
    if args.dialogues:
        wanted = {int(n) for n in args.dialogues.split(",")}
        chosen = [(n, d) for n, d in chosen if n in wanted]
    if args.limit:
        chosen = chosen[: args.limit]
    score = evaluator(args.data) if args.write_code else None
    perfect = Perfect() if args.arm == "perfect" else None
    rows = []
    began = time.perf_counter()
    for number, dialogue in chosen:
        with (
            tempfile.TemporaryDirectory() as tmp,
            environment(Path(tmp), perfect.url if perfect else None),
        ):
            row = run_dialogue(dialogue, perfect, Path(tmp))
        if args.write_code:
            arms = args.code_arms.split(",")
            row["code"], written = write_code(
                args.write_code, score, dialogue, row["context"], arms
            )
            if args.save:
                args.save.mkdir(parents=True, exist_ok=True)
                (args.save / f"{number}-{args.arm}.json").write_text(
                    json.dumps({"start": row["context"], "code": written}, indent=1)
                )
        rows.append(row)
        print(
            f"dialogue {number:3d}: {len(dialogue['sessions'])} sessions,"
            f" {row['stand']}/{row['latest']} stand, {row['stale']}/{row['updated']} stale shown,"
            f" {row['chit_chat']} chit-chat, ~{row['tokens']} tokens"
            + (f", {len(row['errors'])} hook errors: {row['errors'][0]}" if row["errors"] else "")
            + "".join(f", code {arm} {v:.3f}" for arm, v in row.get("code", {}).items()),
            flush=True,
        )
    stand, latest = sum(r["stand"] for r in rows), sum(r["latest"] for r in rows)
    stale, updated = sum(r["stale"] for r in rows), sum(r["updated"] for r in rows)
    sizes = f"{args.min_sessions}-{args.max_sessions}"
    print(f"\n{args.arm} extractor, {len(rows)} dialogues of {sizes} sessions")
    print(f"{'arm':<12}{'stand':>16}{'95% interval':>20}{'stale shown':>16}{'chit-chat':>11}")
    share = stand / latest if latest else 0.0
    print(
        f"{args.arm:<12}{f'{stand}/{latest} {share:.3f}':>16}{interval(stand, latest):>20}"
        f"{f'{stale}/{updated}':>16}{sum(r['chit_chat'] for r in rows):>11}"
    )
    print(f"{'no memory':<12}{f'0/{latest} 0.000':>16}{interval(0, latest):>20}{'0':>16}{'0':>11}")
    tokens = [r["tokens"] for r in rows]
    if tokens:
        print(f"session start: median ~{statistics.median(tokens):.0f} tokens, max ~{max(tokens)}")
    if args.write_code:
        print("code the model writes (MemoryCode's history score, mean over dialogues):")
        for arm in args.code_arms.split(","):
            marks = [r["code"][arm] for r in rows if not math.isnan(r["code"][arm])]
            low, high = (min(marks), max(marks)) if marks else (math.nan, math.nan)
            mean = statistics.fmean(marks) if marks else math.nan
            print(f"  {arm:<8}{mean:.3f}  (dialogues from {low:.3f} to {high:.3f})")
    print(f"{time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
