"""Memory quality with a model in the loop, on LoCoMo (DEV): feed a conversation session by
session through ``extract_memories`` (consolidation on its normal trigger), then answer each
question with the same model from (a) no memory, (b) memdir recall by search, (c) memdir recall
with the model's selection, (d) the whole conversation truncated to the model's context, (e)
the gold evidence turns with their dates (a perfect retriever: the ceiling). Recall includes
the episodes extraction kept (the dated turns) beside the learned memories. Scores
token-level F1 against the gold answers (LoCoMo's QA metric) with a bootstrap 95% interval,
per question category too, and reports how many of the evidence turns each context holds, the
injected tokens per question (and their share of the question's whole conversation) and model
time. ``--episodes-only`` keeps what was said and learns nothing (no model calls before the
questions). Uses the normal memdir configuration.

    OPENAI_BASE_URL=http://127.0.0.1:8088/v1 OPENAI_API_KEY=local MEMDIR_PROVIDER=openai \\
    MEMDIR_MODEL=qwen2.5-coder-1.5b python benchmarks/locomo_qa.py --conversations 0 --limit 40
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import string
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from memdir import MemoryStore
from memdir.config import Config, load_config
from memdir.errors import LLMError, MemdirError
from memdir.learn.consolidate import consolidate_memories, is_due, note_turn
from memdir.learn.conversation import embed_episodes, keep_episodes
from memdir.learn.extract import extract_memories
from memdir.providers import ChatModel, make_model
from memdir.recall import estimate_tokens, render_block, select

SYSTEM = (
    "You answer questions about two people's past conversations. Answer with a short"
    " phrase only (a name, a date, a few words). If the notes do not say, answer your"
    " best guess in a few words."
)


def normalize(text: str) -> list[str]:
    """LoCoMo's answer normalisation: lower case, no punctuation, no articles."""
    text = text.lower().replace(",", "")
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the|and)\b", " ", text)
    return text.split()


def f1(prediction: str, gold: str) -> float:
    p, g = normalize(prediction), normalize(gold)
    common = sum((Counter(p) & Counter(g)).values())
    if not p or not g or common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


class Timed:
    """Counts the model's time and calls."""

    def __init__(self, model: ChatModel) -> None:
        self.inner, self.provider, self.model = model, model.provider, model.model
        self.seconds = 0.0
        self.calls = 0

    def complete(self, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.inner.complete(**kw)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1


def answer(model: Timed, context: str, question: str) -> str:
    content = (
        f"{context}\n\nQuestion: {question}\nShort answer:"
        if context
        else f"Question: {question}\nShort answer:"
    )
    reply = model.complete(
        system=SYSTEM, messages=[{"role": "user", "content": content}], max_tokens=32, purpose="qa"
    )
    return reply.text.strip().splitlines()[0] if reply.text.strip() else ""


def iso_date(locomo: str) -> str:
    """LoCoMo's session time ("1:56 pm on 8 May, 2023") as ISO 8601."""
    import datetime

    when = datetime.datetime.strptime(locomo.strip(), "%I:%M %p on %d %B, %Y")
    return when.strftime("%Y-%m-%dT%H:%M:00Z")


def sessions_of(turns: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    by: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for t in turns:
        by[t["session"]].append(t)
    return [(by[s][0]["date"], by[s]) for s in sorted(by)]


def transcript(turns: list[dict[str, Any]], budget_tokens: int) -> str:
    """The whole conversation with session dates, cut from the start to fit the budget."""
    lines: list[str] = []
    for date, session in sessions_of(turns):
        lines.append(f"[session of {date}]")
        lines += [t["text"] for t in session]
    text = "\n".join(lines)
    while estimate_tokens(text) > budget_tokens:
        text = text[len(text) // 10 :]
    return text


def gold_context(turns: list[dict[str, Any]], question: dict[str, Any]) -> str:
    """The evidence turns of a question, each with the date of its session: what a perfect
    retriever would inject."""
    by_id = {t["id"]: t for t in turns}
    lines = [
        f"[said {by_id[e]['date']}] {by_id[e]['text']}" for e in question["relevant"] if e in by_id
    ]
    return "\n".join(lines)


def evidence_in(turns: list[dict[str, Any]], question: dict[str, Any], context: str) -> float:
    """The share of the question's evidence turns whose words are in the context (escaped or
    not, spaces aside): how much of what a perfect retriever gives this method gave."""
    import html

    def plain(text: str) -> str:  # a kept turn is stripped, its spaces as said
        return " ".join(html.unescape(text).split())

    by_id = {t["id"]: t["text"] for t in turns}
    said = [plain(by_id[e]) for e in question["relevant"] if e in by_id]
    shown = plain(context)
    return sum(1 for text in said if text in shown) / len(said) if said else 0.0


def interval(scores: list[float], rounds: int = 1000) -> tuple[float, float]:
    """A bootstrap 95% interval of the mean (questions resampled with replacement)."""
    import random

    rng = random.Random(13)
    means = sorted(statistics.mean(rng.choices(scores, k=len(scores))) for _ in range(rounds))
    return means[int(0.025 * rounds)], means[int(0.975 * rounds) - 1]


def run_conversation(
    conv: int,
    data: dict[str, Any],
    config: Config,
    limit: int,
    context_tokens: int,
    keep: Path | None = None,
    learned: Path | None = None,
    methods: tuple[str, ...] = ("none", "search", "model", "full", "gold"),
    dated: bool = True,
    episodes_only: bool = False,
) -> dict[str, Any]:
    turns = [m for m in data["memories"] if m["conv"] == conv]
    questions = [q for q in data["queries"] if q["conv"] == conv][:limit]
    tmp = Path(tempfile.mkdtemp(prefix="memdir-locomo-"))
    try:
        cfg = Config(**{**config.__dict__, "dir": tmp / ".memory"})
        store = MemoryStore(tmp / ".memory", cfg, watch=False)
        memory_model = Timed(make_model(cfg, memory=True))
        t0 = time.perf_counter()
        messages: list[Any] = []
        failures: list[str] = []
        if learned is not None:  # answer from a store an earlier run learned (--keep)
            shutil.copytree(learned / f"conv{conv}", tmp / ".memory", dirs_exist_ok=True)
            store = MemoryStore(tmp / ".memory", cfg, watch=False)
            embed_episodes(store)  # as this version's extraction does when it keeps them
        for date, session in [] if learned is not None else sessions_of(turns):
            messages.append({"role": "user", "content": f"(A new conversation session, {date}.)"})
            messages += [{"role": "user", "content": t["text"]} for t in session]
            if episodes_only:  # what was said, kept; nothing learned (no model calls)
                keep_episodes(store, messages, iso_date(date) if dated else None)
                embed_episodes(store)  # as extraction does
                continue
            try:
                extract_memories(
                    store, messages, memory_model, said_at=iso_date(date) if dated else None
                )
                note_turn(store)
                if is_due(store):
                    consolidate_memories(store, memory_model)
            except MemdirError as exc:  # a failed call or a refused plan: counted, run goes on
                failures.append(f"session of {date}: {exc}")
        learn_seconds = time.perf_counter() - t0
        learn_calls = memory_model.calls
        whole = transcript(turns, context_tokens)
        rows: dict[str, list[tuple[float, int]]] = defaultdict(list)
        found: dict[str, list[float]] = defaultdict(list)  # evidence turns in the context
        by_category: dict[tuple[str, int], list[float]] = defaultdict(list)
        seconds: dict[str, float] = defaultdict(float)
        details: list[dict[str, Any]] = []
        for q in questions:
            detail: dict[str, Any] = {
                "question": q["question"],
                "expected": q["answer"],  # (the answer of method "gold" is under "gold")
                "category": q["category"],
            }
            details.append(detail)
            asked = [{"role": "user", "content": q["question"]}]
            for method in methods:
                before = memory_model.seconds
                if method == "none":
                    context = ""
                elif method == "full":
                    context = whole
                elif method == "gold":
                    context = gold_context(turns, q)
                else:
                    sel = select(
                        store,
                        asked,
                        memory_model if method == "model" else None,
                        max_items=cfg.recall_max_items,
                    )
                    context = render_block(
                        store, sel.names, cfg.recall_token_budget, episodes=sel.episodes
                    )
                    detail[f"{method} recalled"] = sel.names + [e.turn.ref for e in sel.episodes]
                try:
                    reply = answer(memory_model, context, q["question"])
                except LLMError as exc:
                    reply = ""
                    failures.append(f"{q['id']} {method}: {exc}")
                seconds[method] += memory_model.seconds - before
                score = f1(reply, q["answer"])
                rows[method].append((score, estimate_tokens(context)))
                found[method].append(evidence_in(turns, q, context))
                by_category[(method, q["category"])].append(score)
                detail[method] = reply
                detail[f"{method} evidence"] = found[method][-1]
        if keep is not None:
            shutil.copytree(tmp / ".memory", keep / f"conv{conv}", dirs_exist_ok=True)
            (keep / f"conv{conv}-answers.json").write_text(
                json.dumps(details, ensure_ascii=False, indent=1), encoding="utf-8"
            )
        return {
            "conv": conv,
            "memories": len(store.entries()),
            "questions": len(questions),
            "learn_seconds": learn_seconds,
            "learn_calls": learn_calls,
            "rows": rows,
            "found": found,
            "by_category": by_category,
            "whole_tokens": estimate_tokens(transcript(turns, 10**9)),
            "seconds": seconds,
            "failures": failures,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--bench-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "bench"
    )
    ap.add_argument("--conversations", type=int, nargs="+", default=[0])
    ap.add_argument("--limit", type=int, default=40, help="Questions per conversation.")
    ap.add_argument(
        "--context-tokens",
        type=int,
        default=12000,
        help="Budget of method (d), the whole conversation.",
    )
    ap.add_argument("--keep", type=Path, help="Keep the learned store and every answer here.")
    ap.add_argument(
        "--learned",
        type=Path,
        help="Answer from the stores an earlier run kept there (no learning).",
    )
    ap.add_argument(
        "--methods",
        nargs="+",
        default=["none", "search", "model", "full", "gold"],
        choices=["none", "search", "model", "full", "gold"],
    )
    ap.add_argument(
        "--episodes-only",
        action="store_true",
        help="Keep what was said as episodes and learn nothing (no model calls before the"
        " questions): recall is the episodes alone.",
    )
    ap.add_argument(
        "--undated",
        action="store_true",
        help="Extract without said_at (memories dated by when they were written).",
    )
    args = ap.parse_args()
    data = json.loads((args.bench_dir / "locomo" / "turns_dev.json").read_text())
    config = load_config()
    results = [
        run_conversation(
            c,
            data,
            config,
            args.limit,
            args.context_tokens,
            args.keep,
            args.learned,
            tuple(args.methods),
            not args.undated,
            args.episodes_only,
        )
        for c in args.conversations
    ]
    names = {
        "none": "(a) no memory",
        "search": "(b) memdir recall, search",
        "model": "(c) memdir recall, model selection",
        "full": "(d) whole conversation (truncated)",
        "gold": "(e) gold evidence turns (the ceiling)",
    }
    print(
        f"model {config.memory_model_name}; conversations {args.conversations};"
        f" {sum(r['questions'] for r in results)} questions;"
        f" {sum(r['memories'] for r in results)} memories learned with"
        f" {sum(r['learn_calls'] for r in results)} calls in"
        f" {sum(r['learn_seconds'] for r in results):.0f} s"
    )
    print(
        "| method | F1 (95% interval) | evidence turns in the context | injected tokens /"
        " question (share of the whole conversation) | model time / question |"
    )
    print("|---|---:|---:|---:|---:|")
    n = sum(r["questions"] for r in results)
    for key, label in names.items():
        if key not in args.methods:
            continue
        scores = [s for r in results for s, _ in r["rows"][key]]
        tokens = [t for r in results for _, t in r["rows"][key]]
        secs = sum(r["seconds"][key] for r in results) / max(1, n)
        low, high = interval(scores)
        share = statistics.mean(
            t / max(1, r["whole_tokens"]) for r in results for _, t in r["rows"][key]
        )  # of its own conversation, per question
        evidence = statistics.mean(x for r in results for x in r["found"][key])
        print(
            f"| {label} | {statistics.mean(scores):.3f} ({low:.3f}–{high:.3f}) |"
            f" {evidence:.0%} | {statistics.mean(tokens):.0f} ({share:.1%}) | {secs:.1f} s |"
        )
    categories = sorted({c for r in results for (_, c) in r["by_category"]})
    print("\n| category | " + " | ".join(names[m][:3] for m in args.methods) + " | questions |")
    print("|---|" + "---:|" * (len(args.methods) + 1))
    for cat in categories:
        cells = []
        for m in args.methods:
            got = [s for r in results for s in r["by_category"].get((m, cat), [])]
            cells.append(f"{statistics.mean(got):.3f}" if got else "–")
        count = sum(len(r["by_category"].get((args.methods[0], cat), [])) for r in results)
        print(f"| {cat} | " + " | ".join(cells) + f" | {count} |")
    failures = [f for r in results for f in r["failures"]]
    print(
        f"\n{len(failures)} failed model calls (scored 0)"
        + "".join(f"\n- {f}" for f in failures[:20])
    )


if __name__ == "__main__":
    main()
