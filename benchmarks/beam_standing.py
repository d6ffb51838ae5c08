"""BEAM's instruction- and preference-following questions served as hosts serve them: by the
session-start text, not by search. For each of the DEV conversations 1-10 (built by
``beam_bench.py``), a store learns through memdir's extraction with the configured memory
model from the message that states each instruction or preference (with the reply after it)
and from three other user messages of the conversation, in the order they were said; then the
store's SessionStart text (``standing.session_start``, as the hook gives it) is checked for
each instruction: at least 60% of the content words of its sentence (the one saying always,
never, prefer, please…). Counts by half (tune 1-5, confirm 6-10).

    OPENAI_BASE_URL=http://127.0.0.1:8088/v1 OPENAI_API_KEY=local MEMDIR_PROVIDER=openai \\
    MEMDIR_MODEL=qwen2.5-coder-1.5b python benchmarks/beam_standing.py [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from memdir import MemoryStore
from memdir.config import load_config
from memdir.errors import MemdirError
from memdir.find.search import tokenize
from memdir.learn.extract import extract_memories
from memdir.providers import make_model
from memdir.standing import session_start

CATEGORIES = ("instruction_following", "preference_following")
GENERIC = set(tokenize("always never prefer ask asking when I me my please use using want like"))
CUE = re.compile(r"\b(always|never|prefer|don't|do not|please|make sure)\b", re.I)
OTHERS = 3  # other user messages learned from, per conversation
SHARE = 0.6  # of an instruction's content words the session-start text must hold


def instruction_of(text: str) -> str:
    """The sentence of a message that states its instruction or preference."""
    sentences = re.split(r"(?<=[.!?])\s+|\n", text)
    return next((s for s in sentences if CUE.search(s)), text[:200])


def conversation(data: dict[str, Any], conv: int, rng: random.Random) -> list[tuple[str, float]]:
    """Learn one conversation's instructions into a new store; each question's category and
    the share of its instruction's words in the store's session-start text."""
    msgs = [m for m in data["memories"] if m["conv"] == conv]
    by_id = {m["id"]: i for i, m in enumerate(msgs)}
    questions = [q for q in data["queries"] if q["conv"] == conv and q["category"] in CATEGORIES]
    wanted = []
    for q in questions:
        said = [e for e in q["relevant"] if msgs[by_id[e]]["role"] == "user"]
        if said:
            wanted.append((q, said[0]))
    users = [m["id"] for m in msgs if m["role"] == "user"]
    learn = sorted({e for _, e in wanted} | set(rng.sample(users, OTHERS)), key=by_id.__getitem__)
    root = Path(tempfile.mkdtemp()) / ".memory"
    config = load_config({"dir": root, "embedder": "none"})
    store = MemoryStore(root, config, watch=False)
    model = make_model(config, memory=True)
    for e in learn:
        i = by_id[e]
        talk = [{"role": "user", "content": msgs[i]["text"][:2000]}]
        if i + 1 < len(msgs) and msgs[i + 1]["role"] == "assistant":
            talk.append({"role": "assistant", "content": msgs[i + 1]["text"][:1500]})
        try:
            extract_memories(store, talk, model, said_at=msgs[i]["date"] or None)
        except MemdirError as exc:  # (a model that timed out: counted as not learned)
            print(f"  conversation {conv}: not learned ({exc})"[:160], flush=True)
    given = session_start(store, store.config)
    have = set(tokenize(given.text))
    print(
        f"conversation {conv}: {len(learn)} messages learned from, {len(given.names)} memories"
        f" standing, {given.tokens} tokens",
        flush=True,
    )
    out = []
    for q, e in wanted:
        terms = set(tokenize(instruction_of(msgs[by_id[e]]["text"]))) - GENERIC
        out.append((q["category"], len(terms & have) / max(1, len(terms))))
    store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path.home() / ".cache" / "memdir-bench" / "beam")
    args = ap.parse_args()
    os.environ.setdefault("MEMDIR_USER_DIR", "none")
    data = json.loads((args.data / "beam_500k_dev.json").read_text())
    rng = random.Random(7)
    began = time.monotonic()
    rows: dict[tuple[str, str], list[float]] = {}
    for conv in range(1, 11):
        half = "tune" if conv <= 5 else "confirm"
        for category, share in conversation(data, conv, rng):
            rows.setdefault((category, half), []).append(share)
    print(f"\n({time.monotonic() - began:.0f} s)")
    for (category, half), shares in sorted(rows.items()):
        held = sum(1 for s in shares if s >= SHARE)
        print(f"{category}, {half}: {held} of {len(shares)} in the session-start text")


if __name__ == "__main__":
    main()
