"""The recall log: what was recalled, for which question, from where, and why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memdir import MemoryStore
from memdir.recall import estimate_tokens
from memdir.recalllog import costs, entries, record

from conftest import CliFn, child_env, trust

KEY = "sk-ant-api03-" + "x7Kq9" * 12


def test_record_redacts_and_reads_back_newest_first(tmp_path: Path) -> None:
    """A recall log line has its credentials redacted and the log reads back newest first."""
    for i in range(3):
        record(
            tmp_path, source="agent", question=f"q{i} with {KEY}", path="search",
            memories=[{"name": "tabs", "scope": "user", "score": 1.5}],
        )  # fmt: skip
    with open(tmp_path / "recall.jsonl", "a") as fh:  # a line of an older version, a torn one
        fh.write('{"time": "2026-01-01T00:00:00Z", "question": "old", "tokens": "12"}\n')
        fh.write('{"time": "torn')
    got = entries(tmp_path)
    assert [e["question"][:3] for e in got] == ["old", "q2 ", "q1 ", "q0 "]
    assert (got[0]["tokens"], got[0]["ms"]) == (None, None)  # not known, never made up
    got = got[1:]
    assert all(KEY not in e["question"] for e in got)
    assert got[0]["memories"] == [{"name": "tabs", "scope": "user", "score": 1.5}]
    assert len(entries(tmp_path, limit=2)) == 2


def test_the_log_is_bounded(tmp_path: Path) -> None:
    """The log is rotated past its size bound, keeping one file before the current one."""
    for i in range(60):
        record(
            tmp_path,
            source="mcp",
            question="x" * 100 + str(i),
            path="llm",
            memories=[],
            max_bytes=2000,
        )
    sizes = [p.stat().st_size for p in tmp_path.glob("recall*.jsonl")]
    assert len(sizes) == 2 and max(sizes) < 2000 + 400
    assert entries(tmp_path, limit=1)[0]["question"].endswith("59")


@pytest.mark.slow
def test_hook_recalls_are_logged_unless_turned_off(tmp_path: Path, cli: CliFn) -> None:
    """Hook recalls are logged unless turned off."""
    import subprocess
    import sys

    store = MemoryStore(tmp_path / ".memory")
    store.write("api-port", type="project_fact", description="The API port", body="8080")
    event = {"prompt": "which port does the API use?", "cwd": str(tmp_path),
             "hook_event_name": "UserPromptSubmit", "session_id": "s-1"}  # fmt: skip

    def hook() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memdir", "hook", "prompt", "--host", "codex"],
            input=json.dumps(event), text=True, capture_output=True, env=child_env(), cwd=tmp_path,
        )  # fmt: skip

    injected = json.loads(hook().stdout)["hookSpecificOutput"]["additionalContext"]
    [e] = entries(store.internal)
    assert (e["source"], e["session"], e["path"]) == ("hook:codex", "s-1", "search")
    assert e["memories"][0]["name"] == "api-port" and e["memories"][0]["score"] is not None
    # what it cost: the tokens of exactly what was injected, and the time the hook took
    assert e["tokens"] == estimate_tokens(injected) and isinstance(e["ms"], int)
    out = cli("recall-log").out
    assert "hook:codex" in out and "asked: which port does the API use?" in out
    assert f"({e['tokens']} tokens, {e['ms']} ms)" in out
    assert json.loads(cli("recall-log", "--json").out)[0]["question"] == event["prompt"]
    (store.root / "config.toml").write_text("recall_log = false\n")
    hook()  # a repository's file cannot turn the user's audit trail off on its own
    assert len(entries(store.internal)) == 2
    trust(store.root / "config.toml")
    hook()
    assert len(entries(store.internal)) == 2


def test_costs_per_source_from_the_whole_log(tmp_path: Path, cli: CliFn) -> None:
    """'memdir recall-log --stats': per source, how many recalls, how many injected
    something, their tokens (mean, max) and time (p50, p95); a line of an older version
    counts as a recall without a cost, and a recall that injected nothing is not 'injected'."""
    store = MemoryStore(tmp_path / ".memory")
    hit = [{"name": "tabs", "scope": None, "score": 1.0}]
    for i, (tokens, ms) in enumerate([(100, 40), (300, 60), (200, 50), (0, 30)]):
        record(store.internal, source="hook:claude-code", question=f"q{i}", path="search",
               memories=hit if tokens else [], tokens=tokens, ms=ms)  # fmt: skip
    record(store.internal, source="start:codex", question="(session start)", path="standing",
           memories=hit, tokens=70, ms=9)  # fmt: skip
    with open(store.internal / "recall.jsonl", "a") as fh:  # an older version's line
        fh.write(json.dumps({"time": "2026-01-01T00:00:00Z", "source": "start:codex",
                             "memories": hit}) + "\n")  # fmt: skip
    got = {c.source: c.to_dict() for c in costs(entries(store.internal))}
    assert got["hook:claude-code"] == {
        "source": "hook:claude-code", "recalls": 4, "injected": 3, "tokens_mean": 150,
        "tokens_max": 300, "tokens_total": 600, "ms_p50": 40, "ms_p95": 60,
    }  # fmt: skip
    assert (got["start:codex"]["recalls"], got["start:codex"]["tokens_mean"]) == (2, 70)
    out = cli("recall-log", "--stats").out
    assert "6 recalls since 2026-01-01T00:00:00Z" in out
    line = next(x for x in out.splitlines() if x.startswith("hook:claude-code"))
    assert line.split() == ["hook:claude-code", "4", "75%", "150", "300", "40", "60"]
    assert json.loads(cli("recall-log", "--stats", "--json").out)[0] == got["hook:claude-code"]
    assert costs([]) == []
