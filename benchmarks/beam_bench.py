"""Recall on BEAM's long user-assistant project chats (DEV: the 500K conversations 1-10).

BEAM (github.com/mohammadtavakoli78/BEAM) states no licence, so its data is not kept here:
this script builds the DEV set from a checkout of the repository (``--beam DIR``) into a
JSON file outside the repository (``--data``), every message of a conversation one memory
(its role and text; the date the conversation gives it, carried forward from the last
``time_anchor``), and each probing question's evidence (``source_chat_ids``) as the
relevant memories. The 100K conversations are not read: they are kept for independent
checks. Abstention questions have no evidence: they are counted by ``floor_bench.py``'s
measure instead (how many get memories injected), here as "abstention injected".

Each conversation is one store; questions are ranked by ``MemoryStore.search`` (BM25 alone
and hybrid with MiniLM) beside BM25 from ``bm25s`` (stemmed) in the same run. Recall@5 by
category and over every answerable question, with a bootstrap 95% interval; halves: tune
(conversations 1-5, where any weight was chosen) and confirm (6-10).

    python benchmarks/beam_bench.py --beam /path/to/BEAM [--data ~/.cache/memdir-bench/beam]
        [--convs 1-10] [--embedder minilm|none] [--compare]

``--compare`` runs each question with each of memdir's recall signals off and on (the
period's weight, ``memdir.find.periods``), in the same run, and prints the paired difference.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from locomo_qa import interval
from memdir import MemoryStore
from memdir.config import Config
from memdir.memory import Memory
from memdir.plan import Put

TUNE = {1, 2, 3, 4, 5}
ANSWERABLE = (
    "information_extraction",
    "knowledge_update",
    "temporal_reasoning",
    "multi_session_reasoning",
    "event_ordering",
    "summarization",
    "contradiction_resolution",
    "instruction_following",
    "preference_following",
)
SPREAD = ("event_ordering", "summarization", "multi_session_reasoning")


def _git_show(repo: Path, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"HEAD:{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _read(beam: Path, path: str) -> str:
    """A file of the BEAM checkout: a work tree, or a bare mirror read through git."""
    if (beam / path).is_file():
        return (beam / path).read_text(encoding="utf-8")
    return _git_show(beam, path)


def _date(anchor: str) -> str | None:
    try:
        return datetime.datetime.strptime(anchor, "%B-%d-%Y").date().isoformat()
    except ValueError:
        return None


def _ids(found: Any) -> list[int]:
    if isinstance(found, dict):
        return [i for v in found.values() for i in _ids(v)]
    if isinstance(found, list):
        return [i for v in found for i in _ids(v)]
    return [found] if isinstance(found, int) else []


def build(beam: Path, convs: list[int]) -> dict[str, Any]:
    memories: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    for conv in convs:
        chat = json.loads(_read(beam, f"chats/500K/{conv}/chat.json"))
        said: str | None = None
        for batch in chat:
            for turn in batch["turns"]:
                for m in turn:
                    said = _date(m.get("time_anchor") or "") or said
                    memories.append(
                        {
                            "id": f"c{conv}-{m['id']}",
                            "conv": conv,
                            "session": batch["batch_number"],
                            "role": m["role"],
                            "date": said,
                            "text": m["content"],
                        }
                    )
        probing = json.loads(
            _read(beam, f"chats/500K/{conv}/probing_questions/probing_questions.json")
        )
        for category, items in probing.items():
            for n, q in enumerate(items):
                relevant = sorted({f"c{conv}-{i}" for i in _ids(q.get("source_chat_ids"))})
                queries.append(
                    {
                        "id": f"c{conv}-{category}-{n}",
                        "conv": conv,
                        "category": category,
                        "question": q["question"],
                        "relevant": relevant,
                    }
                )
    return {"memories": memories, "queries": queries}


def _span(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def store_of(
    docs: list[dict[str, Any]], embedder: str, keep: Path | None = None
) -> tuple[MemoryStore, dict[str, str]]:
    """The conversation as a store; with ``keep``, built there once and opened again by later
    runs (its index and vectors with it)."""
    if keep is None:
        root = Path(tempfile.mkdtemp()) / ".memory"
    else:
        root = (keep / f"conv{docs[0]['conv']}-{embedder}" / ".memory").resolve()
    built = root.is_dir()
    store = MemoryStore(root, Config(dir=root, embedder=embedder), watch=False)
    names = {"m" + d["id"].split("-", 1)[1].zfill(5): d["id"] for d in docs}
    if built:
        store.index.embed_all()
        return store, names
    puts = []
    for d in docs:
        name = "m" + d["id"].split("-", 1)[1].zfill(5)
        text = f"{d['role'].capitalize()}: {d['text']}"
        first = " ".join(text.split())[:150]
        extra = {"said": d["date"]} if d["date"] else {}
        puts.append(Put(Memory(name, "project_fact", first, text[:60_000], extra=extra)))
    store.apply(puts, source="bench", secrets="redact")  # (as learning keeps them)
    store.index.embed_all()
    return store, names


def bm25s_rank(docs: list[dict[str, Any]]) -> Callable[[str, int], list[str]]:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    corpus = [d["text"] for d in docs]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)  # fmt: skip

    def rank(q: str, k: int) -> list[str]:
        tokens = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
        got, _ = retriever.retrieve(tokens, k=min(k, len(docs)), show_progress=False)
        return [docs[int(i)]["id"] for i in got[0]]

    return rank


def recall(got: list[str], relevant: list[str]) -> float:
    return len(set(relevant) & set(got[:5])) / len(relevant)


def _signals() -> dict[str, tuple[object, str, float]]:
    """Each recall signal: the module and constant that set it, and its value when off."""
    from memdir.find import periods

    return {"period weight": (periods, "WEIGHT", 1.0)}


@contextmanager
def signal(name: str, on: bool) -> Iterator[None]:
    """One of memdir's recall signals switched off, or left as it is."""
    module, attr, off = _signals()[name]
    before = getattr(module, attr)
    if not on:
        setattr(module, attr, off)
    try:
        yield
    finally:
        setattr(module, attr, before)


Rows = dict[tuple[str, str, str], list[float]]  # (method, half, category) -> recall@5
Pairs = dict[tuple[str, str], list[tuple[float, float]]]  # (signal, half or category) -> off, on


def run(
    data: dict[str, Any], convs: list[int], embedder: str, compare: bool, keep: Path | None
) -> tuple[Rows, Pairs, dict[str, list[int]]]:
    rows: Rows = {}
    paired: Pairs = {}
    injected = {"tune": [0, 0], "confirm": [0, 0]}
    hybrid = f"hybrid ({embedder})"
    for conv in convs:
        docs = [m for m in data["memories"] if m["conv"] == conv]
        half = "tune" if conv in TUNE else "confirm"
        ranks: dict[str, Callable[[str, int], list[str]]] = {"bm25s (stemmed)": bm25s_rank(docs)}
        stores = {"BM25": store_of(docs, "none", keep)}
        if embedder != "none":
            stores[hybrid] = store_of(docs, embedder, keep)
        for label, (store, names) in stores.items():
            ranks[f"MemoryStore.search, {label}"] = lambda q, k, s=store, n=names: [
                n[h.name] for h in s.search(q, k)
            ]
        for q in (x for x in data["queries"] if x["conv"] == conv):
            if not q["relevant"]:
                if q["category"] == "abstention" and hybrid in stores:
                    from memdir.recall.choose import floor

                    store, _ = stores[hybrid]
                    injected[half][0] += bool(floor(store.search(q["question"], 5), q["question"]))
                    injected[half][1] += 1
                continue
            for label, rank in ranks.items():
                rows.setdefault((label, half, q["category"]), []).append(
                    recall(rank(q["question"], 5), q["relevant"])
                )
            if compare and hybrid in stores:
                store, names = stores[hybrid]
                for name in _signals():
                    pair = []
                    for on in (False, True):
                        with signal(name, on):
                            got = [names[h.name] for h in store.search(q["question"], 5)]
                        pair.append(recall(got, q["relevant"]))
                    for part in (half, q["category"]):
                        paired.setdefault((name, part), []).append((pair[0], pair[1]))
    return rows, paired, injected


def report(
    args: argparse.Namespace, rows: Rows, paired: Pairs, injected: dict[str, list[int]]
) -> None:
    def cell(method: str, half: str, cats: tuple[str, ...]) -> str:
        got = [s for (m, h, c), v in rows.items() for s in v if m == method and h == half
               and c in cats]  # fmt: skip
        if not got:
            return "–"
        lo, hi = interval(got)
        return f"{statistics.mean(got):.3f} [{lo:.2f}, {hi:.2f}] ({len(got)})"

    methods = sorted({m for m, _, _ in rows}, key=lambda m: (not m.startswith("bm25s"), m))
    print(f"BEAM 500K DEV conversations {args.convs}: recall@5 [bootstrap 95%] (questions)")
    for half in ("tune", "confirm"):
        print(f"\n{half}")
        print("| method | all answerable | event ordering + summarization + multi-session |")
        print("|---|---|---|")
        for m in methods:
            print(f"| {m} | {cell(m, half, ANSWERABLE)} | {cell(m, half, SPREAD)} |")
    print("\nby category (both halves)")
    print("| category | " + " | ".join(methods) + " |")
    print("|---|" + "---|" * len(methods))
    for cat in ANSWERABLE:
        cells = []
        for m in methods:
            got = [s for (mm, _, c), v in rows.items() for s in v if mm == m and c == cat]
            cells.append(f"{statistics.mean(got):.3f}" if got else "–")
        print(f"| {cat} | " + " | ".join(cells) + " |")
    for half, (hit, n) in injected.items():
        if n:
            print(f"abstention questions with memories injected ({half}): {hit} of {n}")
    if paired:
        print("\nsignals off vs on (hybrid), paired: R@5 off, on, difference [95%]")
        print("| signal | questions | off | on | on - off |")
        print("|---|---|---:|---:|---|")
        for (name, part), pairs in sorted(paired.items()):
            diffs = [b - a for a, b in pairs]
            lo, hi = interval(diffs)
            off = statistics.mean(a for a, _ in pairs)
            on = statistics.mean(b for _, b in pairs)
            print(
                f"| {name} | {part} ({len(pairs)}) | {off:.3f} | {on:.3f} |"
                f" {on - off:+.3f} [{lo:+.3f}, {hi:+.3f}] |"
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--beam", type=Path, required=True, help="a checkout of the BEAM repository")
    ap.add_argument("--data", type=Path, default=Path.home() / ".cache" / "memdir-bench" / "beam")
    ap.add_argument("--convs", default="1-10")
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--compare", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the stores in --data for later runs")
    args = ap.parse_args()
    convs = _span(args.convs)
    if any(c > 10 for c in convs):
        raise SystemExit("DEV is the 500K conversations 1-10")
    path = args.data / "beam_500k_dev.json"
    if not path.is_file():
        args.data.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(build(args.beam, list(range(1, 11)))))
    data = json.loads(path.read_text())
    os.environ.setdefault("MEMDIR_USER_DIR", "none")
    keep = args.data / "stores" if args.keep else None
    report(args, *run(data, convs, args.embedder, args.compare, keep))


if __name__ == "__main__":
    main()
