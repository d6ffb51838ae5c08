"""What a rerank stage does to recall: LoCoMo DEV's observations kept as memories, each
question's fused top 20 from ``MemoryStore.search`` (hybrid, MiniLM) scored pair by pair, and
recall@5 of three orders: the fused one (the stage off), the scorer's own (the stage as
``memdir.find.rerank.reorder`` builds it), and both fused by reciprocal rank (k = 60). Paired
bootstrap 95% intervals against the fused order, by half of DEV (tune: conversations 0-1;
confirm: 2-4), and recall@20 (what any reordering of the 20 can reach at most).

The scorer is either a cross-encoder folder as ``rerank_model`` takes it (``--cross-encoder
DIR``: the stage's own ``CrossEncoder``), or a chat model behind an OpenAI-compatible
endpoint that returns log-probabilities (``--model-url``, e.g. llama.cpp's server), asked of
each pair whether the memory helps answer the question: its score is P(yes) / (P(yes) +
P(no)) of the first token. Each question's scores are appended to ``--out`` (a run stopped
part-way goes on from there); ``--limit`` questions a conversation, drawn with a fixed seed.

    python benchmarks/rerank_quality_bench.py --model-url http://127.0.0.1:8088/v1 \\
        --out runs.jsonl [--convs 0,1,2,3,4] [--limit 40]
    python benchmarks/rerank_quality_bench.py --report runs.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

TUNE = {0, 1}
CANDIDATES = 20
SYSTEM = (
    "You judge whether a passage from a person's memory helps answer a question. Reply yes or no."
)


def model_scorer(url: str) -> Callable[[str, Sequence[str]], list[float]]:
    """P(yes) of a chat model asked of each pair (the question first: a server that keeps
    the prompt's prefix reads it once)."""

    def one(question: str, text: str) -> float:
        ask = (
            f"Question: {question}\n\nPassage: {text[:600]}\n\n"
            "Does the passage help answer the question? yes or no"
        )
        body = {
            "model": "local",
            "temperature": 0,
            "max_tokens": 1,
            "logprobs": True,
            "top_logprobs": 10,
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": ask},
            ],
        }
        req = urllib.request.Request(
            url.rstrip("/") + "/chat/completions",
            json.dumps(body).encode(),
            {"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=300) as reply:
            got = json.load(reply)
        top = got["choices"][0]["logprobs"]["content"][0]["top_logprobs"]

        def p(word: str) -> float:
            return sum(math.exp(t["logprob"]) for t in top if t["token"].strip().lower() == word)

        yes, no = p("yes"), p("no")
        return yes / (yes + no) if yes + no else 0.5

    return lambda question, texts: [one(question, t) for t in texts]


def encoder_scorer(folder: Path) -> Callable[[str, Sequence[str]], list[float]]:
    from memdir.find.rerank import CrossEncoder

    return CrossEncoder(folder).score


def run(args: argparse.Namespace) -> None:
    from memdir import MemoryStore
    from memdir.config import Config
    from memdir.memory import Memory
    from memdir.plan import Put

    scorer = (
        encoder_scorer(Path(args.cross_encoder))
        if args.cross_encoder
        else model_scorer(args.model_url)
    )
    data = json.loads((Path(args.bench_dir) / "locomo" / "observations_dev.json").read_text())
    out = Path(args.out)
    done = {json.loads(x)["qid"] for x in out.read_text().splitlines()} if out.exists() else set()
    for conv in (int(c) for c in args.convs.split(",")):
        docs = [m for m in data["memories"] if m["conv"] == conv]
        root = Path(tempfile.mkdtemp()) / ".memory"
        store = MemoryStore(root, Config(dir=root, embedder="minilm"))
        names = {f"d{i:05d}": d["id"] for i, d in enumerate(docs)}
        texts = {f"d{i:05d}": d["text"] for i, d in enumerate(docs)}
        store.apply(
            [
                Put(Memory(n, "project_fact", " ".join(texts[n].split())[:150], texts[n]))
                for n in names
            ],
            source="bench",
        )
        store.index.embed_all()
        questions = [q for q in data["queries"] if q["conv"] == conv and q["relevant"]]
        random.Random(7).shuffle(questions)
        for q in questions[: args.limit]:
            qid = f"{conv}:{q['question']}"
            if qid in done:
                continue
            began = time.perf_counter()
            hits = store.search(q["question"], CANDIDATES)
            scores = scorer(q["question"], [texts[h.name] for h in hits])
            row = {
                "qid": qid,
                "conv": conv,
                "relevant": q["relevant"],
                "fused": [names[h.name] for h in hits],
                "scores": scores,
                "seconds": round(time.perf_counter() - began, 2),
            }
            with out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")


def orders(row: dict[str, Any]) -> dict[str, list[str]]:
    fused, scores = row["fused"], row["scores"]
    n = len(fused)
    by_score = sorted(range(n), key=lambda i: -scores[i])  # stable: ties keep the fused order
    place = {i: r for r, i in enumerate(by_score)}
    rrf = sorted(range(n), key=lambda i: -(1 / (60 + i) + 1 / (60 + place[i])))
    return {
        "fused (the stage off)": fused,
        "the scorer's order (the stage as built)": [fused[i] for i in by_score],
        "both, by reciprocal rank": [fused[i] for i in rrf],
    }


def recall(order: Sequence[str], relevant: Sequence[str], k: int = 5) -> float:
    return len(set(relevant) & set(order[:k])) / len(relevant)


def interval(diffs: list[float], seed: int = 1) -> tuple[float, float]:
    rng = random.Random(seed)
    means = sorted(statistics.mean(rng.choices(diffs, k=len(diffs))) for _ in range(2000))
    return means[50], means[1949]


def report(path: Path) -> None:
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    for half in ("tune", "confirm"):
        chosen = [r for r in rows if (r["conv"] in TUNE) == (half == "tune")]
        if not chosen:
            continue
        base = [recall(r["fused"], r["relevant"]) for r in chosen]
        ceiling = statistics.mean(recall(r["fused"], r["relevant"], CANDIDATES) for r in chosen)
        seconds = statistics.median(r["seconds"] for r in chosen)
        print(f"\n{half}: {len(chosen)} questions, recall@{CANDIDATES} {ceiling:.3f},"
              f" median {seconds:.1f} s a question")  # fmt: skip
        print("| order | R@5 | against the fused order |")
        print("|---|---:|---|")
        for label in orders(chosen[0]):
            got = [recall(orders(r)[label], r["relevant"]) for r in chosen]
            diffs = [a - b for a, b in zip(got, base, strict=True)]
            lo, hi = interval(diffs)
            print(f"| {label} | {statistics.mean(got):.3f} |"
                  f" {statistics.mean(diffs):+.3f} [{lo:+.3f}, {hi:+.3f}] |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench-dir", default=str(Path(__file__).parents[2] / "shared" / "bench"))
    ap.add_argument("--model-url", help="an OpenAI-compatible endpoint with logprobs")
    ap.add_argument("--cross-encoder", help="a folder with model.onnx and tokenizer.json")
    ap.add_argument("--convs", default="0,1,2,3,4")
    ap.add_argument("--limit", type=int, default=40, help="questions a conversation")
    ap.add_argument("--out", help="JSON lines: each question's candidates and scores")
    ap.add_argument("--report", help="the table of a run's JSON lines")
    args = ap.parse_args()
    if args.report:
        report(Path(args.report))
        return
    if not args.out or not (args.model_url or args.cross_encoder):
        ap.error("give --out and one of --model-url, --cross-encoder (or --report FILE)")
    run(args)
    report(Path(args.out))


if __name__ == "__main__":
    main()
