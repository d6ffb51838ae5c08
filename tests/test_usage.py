"""The usage log: one line per model call, sums per purpose."""

from __future__ import annotations

from pathlib import Path

from memdir.usage import UsageLog


def test_totals_per_purpose_biggest_first_and_torn_lines_skipped(tmp_path: Path) -> None:
    """Usage totals come per purpose, biggest first, with torn lines skipped."""
    log = UsageLog(tmp_path / "usage.jsonl")
    for purpose, tin, tout, ok in [
        ("select", 100, 10, True),
        ("extract", 900, 200, True),
        ("select", 50, 5, False),
    ]:
        log.record(
            purpose=purpose, provider="openai", model="m", input_tokens=tin,
            output_tokens=tout, latency_ms=12.345, ok=ok,
        )  # fmt: skip
    with open(log.path, "a") as fh:
        fh.write('{"purpose": "agent", "input_tok')  # a crash mid-line
    assert [r["purpose"] for r in log.rows()] == ["select", "extract", "select"]
    extract, select = log.totals()
    assert (extract.purpose, extract.calls, extract.input_tokens) == ("extract", 1, 900)
    assert (select.calls, select.failures, select.output_tokens) == (2, 1, 15)
    assert log.rows()[0]["latency_ms"] == 12.3


def test_a_log_that_cannot_be_written_costs_nothing(tmp_path: Path) -> None:
    """A log that cannot be written costs nothing."""
    log = UsageLog(tmp_path / "missing" / "usage.jsonl")
    log.record(
        purpose="select", provider="p", model="m", input_tokens=1, output_tokens=1, latency_ms=1
    )
    assert log.rows() == [] and log.totals() == []
