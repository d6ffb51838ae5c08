"""Secret detection: catch rate on realistic credential formats and false-positive rate on
look-alikes (commit hashes, UUIDs, base64 of ordinary text, ordinary prose), in one run.

    python benchmarks/secrets_bench.py [--corpus tests/data/secrets_corpus.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memdir.gate.secrets import redact, scan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--corpus",
        type=Path,
        default=Path(__file__).resolve().parents[1] / "tests/data/secrets_corpus.json",
    )
    data = json.loads(ap.parse_args().corpus.read_text(encoding="utf-8"))
    caught = [s for s in data["secrets"] if scan(s)]
    flagged = [s for s in data["lookalikes"] if scan(s)]
    print("| set | texts | flagged | rate |")
    print("|---|---:|---:|---:|")
    print(
        f"| credentials (catch rate) | {len(data['secrets'])} | {len(caught)} |"
        f" {len(caught) / len(data['secrets']):.0%} |"
    )
    print(
        f"| look-alikes (false positives) | {len(data['lookalikes'])} | {len(flagged)} |"
        f" {len(flagged) / len(data['lookalikes']):.0%} |"
    )
    for s in data["secrets"]:
        if s not in caught:
            print(f"missed: {s[:60]}")
    for s in flagged:
        print(f"false positive: {redact(s)[0][:80]}")


if __name__ == "__main__":
    main()
