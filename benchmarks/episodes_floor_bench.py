"""Silence for the earlier turns: how often recall's episode search (``recall.episodes_for``)
brings back turns for a prompt the conversation cannot answer, and what it finds for the
questions it can — with the names rule (a question naming someone or something no kept
turn mentions counts only turns holding its own terms) and without it, in the same run.

Each LoCoMo DEV conversation is kept as episodes (as ``episodes_bench.py`` keeps them) and
embedded; unanswerable: the 60 coding prompts of ``floor_bench.py`` and 40 questions of the
other conversations; answerable: the conversation's own questions (whether any turn comes
back, and the share of their evidence in what does). Choose on conversations 0-1, confirm on
2-4 (``--convs``); bootstrap 95% intervals.

    python benchmarks/episodes_floor_bench.py [--convs 0,1] [--embedder minilm]
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from pathlib import Path

import memdir.find.asked
from episodes_bench import kept_as_episodes
from floor_bench import CODING_HELD_OUT, CODING_HELD_OUT_2, CODING_TUNE, rate
from locomo_qa import evidence_in
from memdir import MemoryStore
from memdir.episodes import Said
from memdir.recall import episodes_for

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench" / "locomo"


def without_and_with(store: MemoryStore, question: str) -> tuple[list[Said], list[Said]]:
    """The turns found without the names rule (no name taken from the question), and with."""
    names = memdir.find.asked.names
    memdir.find.asked.names = lambda query: []
    try:
        before = episodes_for(store, question)
    finally:
        memdir.find.asked.names = names
    return before, episodes_for(store, question)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--convs", default="0,1")
    ap.add_argument("--embedder", default="minilm")
    args = ap.parse_args()
    data = json.loads((BENCH / "turns_dev.json").read_text(encoding="utf-8"))
    rows: dict[tuple[str, int], list[float]] = {}

    def add(key: str, pair: Sequence[object]) -> None:
        for i, value in enumerate(pair):
            rows.setdefault((key, i), []).append(float(value))

    for conv in (int(c) for c in args.convs.split(",")):
        turns = [t for t in data["memories"] if t["conv"] == conv]
        store = kept_as_episodes(turns, args.embedder)
        for prompt in CODING_TUNE + CODING_HELD_OUT + CODING_HELD_OUT_2:
            before, after = without_and_with(store, prompt)
            add("coding", (bool(before), bool(after)))
        for q in [q for q in data["queries"] if q["conv"] != conv][:40]:
            before, after = without_and_with(store, q["question"])
            add("other", (bool(before), bool(after)))
        ids = {t["id"] for t in turns}
        for q in data["queries"]:
            if q["conv"] != conv or not any(e in ids for e in q["relevant"]):
                continue
            found = without_and_with(store, q["question"])
            add("answered", tuple(bool(f) for f in found))
            share = [evidence_in(turns, q, "\n".join(s.turn.text for s in f)) for f in found]
            add("evidence", tuple(share))
        store.close()
    labels = {
        "coding": "coding prompts (three sets): turns injected",
        "other": "another conversation's questions: turns injected",
        "answered": "answerable: any turn injected",
        "evidence": "answerable: share of the evidence injected",
    }
    print(f"conversations {args.convs}, embedder {args.embedder}")
    print("| measure | without the names rule | with it |")
    print("|---|---|---|")
    for key, label in labels.items():
        print(f"| {label} | {rate(rows[(key, 0)])} | {rate(rows[(key, 1)])} |")
    diffs = [a - b for a, b in zip(rows[("evidence", 1)], rows[("evidence", 0)], strict=True)]
    rng = random.Random(1)
    means = sorted(sum(rng.choices(diffs, k=len(diffs))) / len(diffs) for _ in range(2000))
    mean = sum(diffs) / len(diffs)
    print(f"evidence, with minus without: {mean:+.3f} [{means[50]:+.3f}, {means[1949]:+.3f}]")


if __name__ == "__main__":
    main()
