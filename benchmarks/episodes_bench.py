"""How much of what a perfect retriever gives does recall's episode search find, without a
model: every DEV conversation of LoCoMo kept as episodes through ``keep_episodes`` (as the
agent and extraction keep them, with each session's date) and embedded as extraction does;
then, for every question, the share of its evidence turns that are in the turns found, and
their tokens. Variants: BM25 alone with the two-shared-terms rule (the previous version),
BM25 fused with the embeddings, more turns, and each turn with the one said after it (what
recall does now: ``recall.episodes_for``, timed too); multi-query fusion (the question and
queries made of it: its content words, its names and numbers, fused by reciprocal rank).

    python benchmarks/episodes_bench.py [--bench-dir ../shared/bench] [--embedder minilm]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from locomo_qa import evidence_in, iso_date, sessions_of
from memdir import MemoryStore
from memdir.config import Config
from memdir.episodes import Episodes, Said
from memdir.find import periods
from memdir.find.embed import from_config
from memdir.find.periods import named_period
from memdir.find.search import STOP_WORDS
from memdir.learn.conversation import embed_episodes, keep_episodes
from memdir.recall import episodes_for, estimate_tokens


def searched(
    episodes: Episodes,
    embedder: Any,
    k: int,
    fused: bool,
    following: int,
    two_terms: bool,
    preceding: int = 0,
) -> Callable[[str], list[Said]]:
    """One variant of the episode search: ``k`` turns, fused with the embeddings or not, each
    with ``following`` turns, filtered by two shared terms or not."""

    def run(query: str) -> list[Said]:
        hits = episodes.search(
            query,
            k * 2,
            embedder=embedder if fused else None,
            following=following,
            preceding=preceding,
        )
        if two_terms:
            hits = [h for h in hits if h.matched >= min(2, h.asked)]
        return hits[:k]

    return run


_WORD = re.compile(r"[A-Za-z][\w'-]*|\d[\w/-]*")
_ASKING = set(
    "what when where who whom which why how did does do is was were are has have had would"
    " could likely might".split()
)


def names_in(question: str) -> str:
    """The question's names and numbers (capitalised words, digits), as a query of its own."""
    words = _WORD.findall(question)
    return " ".join(
        w for w in words if w[0].isupper() or w[0].isdigit() if w.lower() not in _ASKING
    )


def content_words(question: str) -> str:
    """The question without its stop words and question words, as a query of its own."""
    return " ".join(w for w in _WORD.findall(question) if w.lower() not in STOP_WORDS | _ASKING)


def fused_queries(
    episodes: Episodes, embedder: Any, k: int, parts: list[Callable[[str], str]]
) -> Callable[[str], list[Said]]:
    """Multi-query fusion: the question and each query ``parts`` make of it, searched apart
    (each turn with the one after it) and fused by reciprocal rank (k = 2, equal weights)."""

    def run(query: str) -> list[Said]:
        lists = [episodes.search(query, k * 2, embedder=embedder, following=1)]
        lists += [
            episodes.search(sub, k * 2, embedder=embedder, following=1) if sub.strip() else []
            for sub in (part(query) for part in parts)
        ]
        score: dict[str, float] = {}
        first: dict[str, Said] = {}
        for hits in lists:
            for rank, hit in enumerate(hits):
                score[hit.turn.ref] = score.get(hit.turn.ref, 0.0) + 1 / (2 + rank + 1)
                first.setdefault(hit.turn.ref, hit)
        return [first[ref] for ref in sorted(score, key=lambda r: -score[r])][:k]

    return run


TUNE = {0, 1}  # conversations choices are made on; the others confirm them
WEIGHT = periods.WEIGHT  # a period named by the question, as recall weighs it


def kept_as_episodes(turns: list[dict[str, Any]], embedder: str) -> MemoryStore:
    """A new store keeping a LoCoMo conversation's turns as episodes, session by session with
    each session's date, embedded (as the agent and extraction keep and embed them)."""
    root = Path(tempfile.mkdtemp()) / ".memory"
    store = MemoryStore(root, Config(dir=root, embedder=embedder), watch=False)
    messages: list[Any] = []
    for date, session in sessions_of(turns):
        messages.append({"role": "user", "content": f"(A new conversation session, {date}.)"})
        messages += [{"role": "user", "content": t["text"]} for t in session]
        keep_episodes(store, messages, iso_date(date))
    embed_episodes(store)
    return store


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--bench-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "bench"
    )
    ap.add_argument("--embedder", default="minilm")
    args = ap.parse_args()
    data = json.loads((args.bench_dir / "locomo" / "turns_dev.json").read_text())
    conversations = sorted({t["conv"] for t in data["memories"]})
    found: dict[str, list[tuple[float, int]]] = {}
    halves: dict[tuple[str, str], list[tuple[float, float]]] = {}
    named: dict[str, list[float]] = {}  # the questions that name a period
    seconds: list[float] = []
    for conv in conversations:
        turns = [t for t in data["memories"] if t["conv"] == conv]
        questions = [q for q in data["queries"] if q["conv"] == conv]
        store = kept_as_episodes(turns, args.embedder)
        config = store.config
        embedder = from_config(config)
        episodes = Episodes(store.internal, config)
        ids = {t["id"] for t in turns}

        e = (episodes, embedder)
        variants: dict[str, Callable[[str], list[Said]]] = {
            "2 turns, BM25, two shared terms (the previous version)": searched(
                *e, 2, False, 0, True
            ),
            "2 turns, BM25 fused with the embeddings": searched(*e, 2, True, 0, False),
            "4 turns, fused": searched(*e, 4, True, 0, False),
            "2 turns, fused, each with the turn after it": searched(*e, 2, True, 1, False),
            "3 turns, fused, each with the turn after it": searched(*e, 3, True, 1, False),
            "4 turns, fused, each with the turn after it": searched(*e, 4, True, 1, False),
            "5 turns, fused, each with the turn after it": searched(*e, 5, True, 1, False),
            "6 turns, fused, each with the turn after it": searched(*e, 6, True, 1, False),
            "8 turns, fused, each with the turn after it": searched(*e, 8, True, 1, False),
            "4 turns, fused, each with the two turns after it": searched(*e, 4, True, 2, False),
            "5 turns, fused, each with the two turns after it": searched(*e, 5, True, 2, False),
            "3 turns, fused, each with the three turns after it": searched(*e, 3, True, 3, False),
            "4 turns, fused, each with the three turns after it": searched(*e, 4, True, 3, False),
            "5 turns, fused, each with the turn before and the turn after": searched(
                *e, 5, True, 1, False, 1
            ),
            "4 turns, fused, each with the turn before and two after": searched(
                *e, 4, True, 2, False, 1
            ),
            "2 turns, the question fused with its content words (each with the turn after)": (
                fused_queries(*e, 2, [content_words])
            ),
            "2 turns, the question fused with its names and numbers": fused_queries(
                *e, 2, [names_in]
            ),
            "2 turns, the question, its names and its content words fused": fused_queries(
                *e, 2, [names_in, content_words]
            ),
        }
        whole = sum(estimate_tokens(t["text"]) for t in turns)
        half = "tune" if conv in TUNE else "confirm"
        for q in questions:
            if not any(e in ids for e in q["relevant"]):
                continue
            for name, run in variants.items():
                text = "\n".join(h.turn.text for h in run(q["question"]))
                share = evidence_in(turns, q, text)
                found.setdefault(name, []).append((share, estimate_tokens(text)))
                halves.setdefault((name, half), []).append((share, estimate_tokens(text) / whole))
            for name, weight in (
                ("recall.episodes_for, the period a question names not weighed", 1.0),
                ("recall.episodes_for (this version)", WEIGHT),
            ):
                periods.WEIGHT = weight
                t0 = time.perf_counter()
                chosen = episodes_for(store, q["question"])
                seconds.append(time.perf_counter() - t0)
                text = "\n".join(h.turn.text for h in chosen)
                share = evidence_in(turns, q, text)
                found.setdefault(name, []).append((share, estimate_tokens(text)))
                halves.setdefault((name, half), []).append((share, estimate_tokens(text) / whole))
                if named_period(q["question"]):
                    named.setdefault(name, []).append(share)
            periods.WEIGHT = WEIGHT
        episodes.close()
    n = len(next(iter(found.values())))
    print(
        f"LoCoMo DEV, {len(conversations)} conversations, {n} questions, embedder {args.embedder}"
    )
    print("| episodes in recall | evidence turns found | tokens of turns / question |")
    print("|---|---:|---:|")
    for name, rows in found.items():
        print(
            f"| {name} | {statistics.mean(s for s, _ in rows):.3f} |"
            f" {statistics.mean(t for _, t in rows):.0f} |"
        )
    print(f"\nrecall.episodes_for: median {1000 * statistics.median(seconds):.1f} ms per question")
    print("\nBy half of DEV (tune: conversations 0-1; confirm: 2-4):")
    print("| episodes in recall | evidence, tune | evidence, confirm | share of the conversation |")
    print("|---|---:|---:|---:|")
    for name in found:
        tune, confirm = halves.get((name, "tune"), []), halves.get((name, "confirm"), [])
        share = statistics.mean(t for _, t in tune + confirm)
        print(
            f"| {name} | {statistics.mean(s for s, _ in tune):.3f} |"
            f" {statistics.mean(s for s, _ in confirm):.3f} | {100 * share:.1f}% |"
        )

    for name, shares in named.items():
        print(
            f"\n{name}, the {len(shares)} questions naming a period:"
            f" evidence {statistics.mean(shares):.3f}"
        )


if __name__ == "__main__":
    main()
