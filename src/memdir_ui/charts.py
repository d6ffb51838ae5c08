"""The charts of the activity page, as numbers an SVG template draws: memories over time by
type, and model calls and tokens by purpose. No JavaScript, no chart library.
This module does NOT read stores.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta

from memdir.entry import Entry
from memdir.usage import UsageTotals

COLORS = ("#2f6fde", "#d9480f", "#2b8a3e", "#862e9c", "#e67700", "#0b7285", "#5c5f66")
WIDTH, HEIGHT, POINTS = 640, 160, 40


@dataclass(frozen=True)
class Series:
    """One type's line: its colour, SVG points and how many memories it has now."""

    type: str
    color: str
    points: str
    count: int


@dataclass(frozen=True)
class Growth:
    """The memories-over-time chart."""

    width: int
    height: int
    series: list[Series]
    start: str
    end: str
    top: int


@dataclass
class Bar:
    """One purpose's model usage."""

    purpose: str
    calls: int
    failures: int
    tokens: int
    width: float
    seconds: float

    @property
    def note(self) -> str:
        """The words after the bar."""
        failed = f", {self.failures} failed" if self.failures else ""
        return f"{self.calls} calls, {self.tokens} tokens{failed}"


@dataclass
class Usage:
    """The usage chart: its bars and a layout in which no label is cut off (the purposes'
    column as wide as the longest, each bar's words inside the picture)."""

    bars: list[Bar]
    left: float  # where the bars start
    width: float  # of the whole picture

    def __len__(self) -> int:
        return len(self.bars)

    def __iter__(self) -> Iterator[Bar]:
        return iter(self.bars)


CHAR = 7.2  # the width of one character of the charts' 12px text, generously
USAGE_WIDTH = 640.0


def _day(text: str | None) -> date | None:
    try:
        return date.fromisoformat((text or "")[:10])
    except ValueError:
        return None


def growth_chart(entries: Iterable[Entry], today: date | None = None) -> Growth:
    """How many memories of each type existed on each day (by their ``created`` dates)."""
    days: dict[str, list[date]] = {}
    for e in entries:
        d = _day(e.created) or _day(e.updated)
        if d is not None:
            days.setdefault(e.type, []).append(d)
    end = today or date.today()
    first = min((d for ds in days.values() for d in ds), default=end)
    span = max(1, (end - first).days)
    ticks = [first + timedelta(days=span * i / (POINTS - 1)) for i in range(POINTS)]
    totals = {t: sorted(ds) for t, ds in days.items()}
    top = max((len(ds) for ds in totals.values()), default=0) or 1
    series = []
    for i, (kind, ds) in enumerate(sorted(totals.items(), key=lambda kv: -len(kv[1]))):
        points = []
        for j, tick in enumerate(ticks):
            count = sum(1 for d in ds if d <= tick)
            x = round(j * WIDTH / (POINTS - 1), 1)
            y = round(HEIGHT - count * HEIGHT / top, 1)
            points.append(f"{x},{y}")
        series.append(Series(kind, COLORS[i % len(COLORS)], " ".join(points), len(ds)))
    return Growth(WIDTH, HEIGHT, series, first.isoformat(), end.isoformat(), top)


def usage_chart(totals: Iterable[UsageTotals]) -> Usage:
    """One bar per purpose: calls, tokens in and out, failures; widths relative to the most,
    laid out so the longest purpose and every bar's words fit."""
    merged: dict[str, UsageTotals] = {}
    for t in totals:
        m = merged.setdefault(t.purpose, UsageTotals(t.purpose))
        m.calls += t.calls
        m.failures += t.failures
        m.input_tokens += t.input_tokens
        m.output_tokens += t.output_tokens
        m.latency_ms += t.latency_ms
    rows = sorted(merged.values(), key=lambda t: -(t.input_tokens + t.output_tokens))
    most = max((t.input_tokens + t.output_tokens for t in rows), default=0) or 1
    bars = [
        Bar(
            t.purpose,
            t.calls,
            t.failures,
            t.input_tokens + t.output_tokens,
            0.0,
            round(t.latency_ms / 1000, 1),
        )
        for t in rows
    ]
    left = round(max((len(b.purpose) for b in bars), default=0) * CHAR + 12, 1)
    words = max((len(b.note) for b in bars), default=0) * CHAR + 8
    room = max(USAGE_WIDTH - left - words, 120.0)  # a narrow picture grows rather than clip
    for b in bars:
        b.width = round(room * b.tokens / most, 1)
    return Usage(bars, left, round(left + room + words, 1))
