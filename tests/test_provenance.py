"""Where a memory's text came from, read from the store's log: the same answer as reading the
whole log forward, found by reading back from the end only as far as needed."""

from __future__ import annotations

import json
import random
from pathlib import Path

from memdir.gate.provenance import CHUNK, HAND, Ledger, label_of


def _line(i: int, names: list[str], source: str) -> str:
    changes = [{"name": n, "file": f"{n}.md", "action": "update", "before": None,
                "reason": "", "digest": f"{n}-{i}"} for n in names]  # fmt: skip
    op = {"id": f"op{i}", "time": f"t{i}", "source": source, "summary": "", "changes": changes}
    return json.dumps(op) + "\n"


def test_the_ledger_agrees_with_the_whole_log_and_reads_back_only_what_it_needs(
    tmp_path: Path,
) -> None:
    """The ledger agrees with the whole log and reads back only what it needs."""
    rnd = random.Random(7)
    log = tmp_path / "log.jsonl"
    truth: dict[str, tuple[str, str]] = {}
    with log.open("w") as fh:
        for i in range(6000):
            names = rnd.sample([f"m{k}" for k in range(400)], rnd.choice((1, 1, 2)))
            source = rnd.choice(("cli", "extract:agent", "sync", "ui"))
            fh.write(_line(i, names, source))
            for n in names:
                truth[n] = (f"{n}-{i}", label_of(source))
        fh.write('{"id": "torn"')  # a writer killed mid-line
    ledger = Ledger(log)
    newest = max(truth, key=lambda n: int(truth[n][0].rsplit("-", 1)[1]))
    assert ledger.origin(newest, truth[newest][0]).label == truth[newest][1]
    assert ledger._start is not None and ledger._start > log.stat().st_size - 2 * CHUNK
    for name, (digest, label) in truth.items():
        assert ledger.origin(name, digest).label == label
        assert ledger.origin(name, "other digest").label == HAND  # edited by hand since
    assert ledger.origin("never-logged", None).label == HAND
    with log.open("a") as fh:  # the torn line finished, then a newer change
        fh.write(', "time": "t", "source": "cli", "changes": []}\n')
        fh.write(_line(9999, [newest], "mcp:codex"))
    assert ledger.origin(newest, f"{newest}-9999").label == "mcp:codex"


def test_a_log_line_longer_than_a_chunk_is_read_and_nothing_loops(tmp_path: Path) -> None:
    """One operation with thousands of changes writes a log line of over a megabyte: the
    ledger reads it (and the lines before it) and answers, where it once looped forever."""
    log = tmp_path / "log.jsonl"
    big = [f"bulk-{k:05d}" for k in range(9000)]
    with log.open("w") as fh:
        fh.write(_line(1, ["early"], "cli"))
        fh.write(_line(2, big, "sync"))
        fh.write(_line(3, big[:5000], "extract:agent"))
    assert log.stat().st_size > 1_000_000 and max(map(len, log.open())) > 16 * CHUNK
    ledger = Ledger(log)
    assert ledger.origin("early", "early-1").label == "cli"
    assert ledger.origin("bulk-08999", "bulk-08999-2").label == label_of("sync")
    assert ledger.origin("bulk-00001", "bulk-00001-3").label == "learned"
    assert ledger.origin("absent", None).label == HAND
