"""Questions that name a period ("What did Maria share on 16 June, 2023?", "…in January
2024?"), over memories: LoCoMo DEV's observations (short dated facts, the closest analogue of
learned memories) kept as memories with the date each was said, ranked by
``MemoryStore.search`` (hybrid, MiniLM) with what was said in the named period weighed
(``memdir.find.periods``) and without (the weight set to 1 in the same run). Recall@5 by half of
DEV (tune: conversations 0-1, where the weight was chosen; confirm: 2-4), over every question
and over those naming a period. Episodes are measured by ``episodes_bench.py``.

    python benchmarks/periods_bench.py [--bench-dir ../shared/bench] [--embedder minilm]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from locomo_qa import iso_date
from memdir import MemoryStore
from memdir.config import Config
from memdir.find import periods
from memdir.memory import Memory
from memdir.plan import Put

TUNE = {0, 1}


def recall_at_5(store: MemoryStore, names: dict[str, str], q: dict[str, Any]) -> float:
    top = [names[h.name] for h in store.search(q["question"], 5)]
    return sum(1 for r in q["relevant"] if r in top) / len(q["relevant"])


def arm_at_5(store: MemoryStore, names: dict[str, str], q: dict[str, Any]) -> float:
    """The period as a retrieval arm of its own, fused by reciprocal rank (k = 60) with the
    ranking, plus a bounded boost (×1.1): the memories said in the period, in the ranking's
    order among the best ``periods.CANDIDATES``, are the arm (tried, not built)."""
    period = periods.named_period(q["question"])
    before = periods.WEIGHT
    periods.WEIGHT = 1.0
    try:
        hits = store.search(q["question"], periods.CANDIDATES)
    finally:
        periods.WEIGHT = before
    if period is None:
        top = [names[h.name] for h in hits[:5]]
    else:
        inside = [h.name for h in hits if periods.weight(period, h.memory.extra.get("said")) > 1]
        arm = {n: i + 1 for i, n in enumerate(inside)}
        fused = {
            h.name: (1 / (60 + i + 1) + (1 / (60 + arm[h.name]) if h.name in arm else 0.0))
            * (1.1 if h.name in arm else 1.0)
            for i, h in enumerate(hits)
        }
        top = [names[n] for n in sorted(fused, key=lambda n: -fused[n])[:5]]
    return sum(1 for r in q["relevant"] if r in top) / len(q["relevant"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--bench-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "bench"
    )
    ap.add_argument("--embedder", default="minilm")
    args = ap.parse_args()
    data = json.loads((args.bench_dir / "locomo" / "observations_dev.json").read_text())
    chosen = periods.WEIGHT
    rows: dict[tuple[str, str, bool], list[float]] = {}
    for conv in sorted({m["conv"] for m in data["memories"]}):
        root = Path(tempfile.mkdtemp()) / ".memory"
        store = MemoryStore(root, Config(dir=root, embedder=args.embedder), watch=False)
        names: dict[str, str] = {}
        puts = []
        for i, m in enumerate(x for x in data["memories"] if x["conv"] == conv):
            name = f"o{i:05d}"
            names[name] = m["id"]
            said = {"said": iso_date(m["date"])}
            puts.append(Put(Memory(name, "project_fact", m["text"][:150], m["text"], extra=said)))
        store.apply(puts, source="bench")
        store.index.embed_all()
        half = "tune" if conv in TUNE else "confirm"
        for q in (x for x in data["queries"] if x["conv"] == conv):
            named = periods.named_period(q["question"]) is not None
            for label, weight in (("without", 1.0), ("weighed", chosen)):
                periods.WEIGHT = weight
                rows.setdefault((label, half, named), []).append(recall_at_5(store, names, q))
            periods.WEIGHT = chosen
            rows.setdefault(("arm", half, named), []).append(arm_at_5(store, names, q))
        periods.WEIGHT = chosen

    def mean(label: str, half: str, named: bool | None = None) -> str:
        got = [
            s for (lab, h, n), v in rows.items() for s in v if lab == label and h == half
            if named is None or n == named
        ]  # fmt: skip
        return f"{statistics.mean(got):.3f}"

    named_n = sum(len(v) for (lab, _, n), v in rows.items() if lab == "without" and n)
    print(f"LoCoMo DEV observations as dated memories, embedder {args.embedder}, recall@5")
    print(
        "| memory search | tune, all | confirm, all |"
        f" tune, naming a period | confirm, naming a period ({named_n} questions) |"
    )
    print("|---|---:|---:|---:|---:|")
    for label, text in (
        ("without", "without the period"),
        ("weighed", "the period weighed"),
        ("arm", "the period as an arm fused by RRF, ×1.1 (tried)"),
    ):
        print(
            f"| {text} | {mean(label, 'tune')} | {mean(label, 'confirm')} |"
            f" {mean(label, 'tune', True)} | {mean(label, 'confirm', True)} |"
        )


if __name__ == "__main__":
    main()
