"""The instruction screen: how many planted instructions it holds and how many ordinary
memories it holds by mistake, on the tuning set, on a set kept out of tuning, and on
LoCoMo's observations (benchmark data: ordinary facts about people), in one run.

    python benchmarks/injection_bench.py [--show]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memdir.gate.instructions import screen

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "bench" / "locomo" / "observations_dev.json"


def _row(label: str, texts: list[str], want: bool, show: bool) -> None:
    flagged = [t for t in texts if screen(t) is not None]
    rate = len(flagged) / len(texts) if texts else 0.0
    what = "held (target ≥ 95%)" if want else "held by mistake (target ≤ 3%)"
    print(f"| {label} | {len(texts)} | {len(flagged)} | {rate:.1%} {what} |")
    if show:
        for t in texts:
            why = screen(t)
            if (why is None) == want:
                print(f"|   {'missed' if want else 'flagged'}: {t[:90]} | | | {why or ''} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--show", action="store_true", help="List every miss and false hold.")
    show = ap.parse_args().show
    sets = [
        ("tuning set", "injection_corpus.json"),
        ("r1 (tuned on after its first run)", "injection_holdout.json"),
        ("r2 (tuned on after its first run)", "injection_holdout_r2.json"),
        ("r3 (tuned on after its first run)", "injection_holdout_r3.json"),
        ("r4 (kept out: never tuned on)", "injection_holdout_r4.json"),
        ("r5 tuning (other languages, two-step downloads, …)", "injection_tuning_r5.json"),
        ("r5 (kept out: never tuned on)", "injection_holdout_r5.json"),
    ]
    data = [(label, json.loads((ROOT / "tests/data" / f).read_text("utf-8"))) for label, f in sets]
    print("| set | texts | held | rate |")
    print("|---|---:|---:|---|")
    for label, d in data:
        _row(f"injected, {label}", d["injected"], True, show)
    for label, d in data:
        _row(f"ordinary, {label}", d["ordinary"], False, show)
    if LOCOMO.is_file():
        obs = [m["text"] for m in json.loads(LOCOMO.read_text(encoding="utf-8"))["memories"]]
        _row("ordinary, LoCoMo observations (DEV)", obs, False, show)


if __name__ == "__main__":
    main()
