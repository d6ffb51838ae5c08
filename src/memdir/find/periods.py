"""The period of time a question names ("in June", "on 16 June, 2023", "in 2023", "last
week"), so that what was said then can rank above the same words said at another time.

``named_period`` reads a question and gives the first period it names as two dates (both
included), or None. Months and days without a year take the year of the text they are
compared with (``Period.holds``); "yesterday", "last week" and "last month" count back from
``today``. ``weight`` is what a hit said in the period counts for: episode search and memory
search (a store's and ``Scopes``') weigh by it, ``in_period_first`` re-orders memory hits.
This module does NOT rank anything itself.
"""

from __future__ import annotations

import calendar
import dataclasses
import datetime
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import MemdirError

if TYPE_CHECKING:
    from ..entry import Entry, Hit
    from ..memory import Memory

# The hits said in the period a question names, or within a week after it, weigh this much
# more among this many candidates (chosen on half of LoCoMo DEV, benchmarks/README.md)
CANDIDATES = 60
WEIGHT = 1.2
SLACK_DAYS = 7

_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
_MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"  # noqa: E501
_MONTHS["sept"] = 9
MONTHS = frozenset(_MONTHS)  # the month names and abbreviations read, in small letters
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
# "16 June, 2023", "June 16, 2023", "June 2023", "June", "2023" (checked in this order)
_DAY_MONTH = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\b\.?,?(?:\s+{_YEAR}\b)?", re.I)
_MONTH_DAY = re.compile(rf"\b{_MONTH}\.?\s+{_DAY}\b,?(?:\s+{_YEAR}\b)?", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}\.?,?(?:\s+{_YEAR}\b)?", re.I)
_YEAR_ALONE = re.compile(rf"\b(?:in|of|during|since|for)\s+{_YEAR}\b", re.I)
_RELATIVE = re.compile(
    r"\b(the day before yesterday|yesterday|today|this week|last week|this month|last month|"
    r"this year|last year)\b",
    re.I,
)
_NUMBERS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a few": 3,
            "several": 3}  # fmt: skip
_AGO = re.compile(
    r"\b(\d{1,3}|a couple of|a few|several|a|one|two|three|four|five|six|seven|eight|nine|"
    r"ten)\s+(day|week|month|year)s?\s+ago\b",
    re.I,
)
# Chinese: 昨天, 上周, 上个月, 去年, 三天前, 几周前, 五月, 2023年, 2023年5月, 5月16日
_ZH_RELATIVE = re.compile(
    r"(前天|昨天|今天|本周|这周|这个星期|上周|上个星期|上星期|本月|这个月|上个月|上月|今年|去年|前年)"
)
_ZH_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8,
              "九": 9, "十": 10, "十一": 11, "十二": 12, "几": 3}  # fmt: skip
_ZH_NUMBER = r"(\d{1,3}|十[一二]?|[一二两三四五六七八九几])"
_ZH_AGO = re.compile(_ZH_NUMBER + r"\s*(天|周|个星期|星期|个月|年)前")
_ZH_DATE = re.compile(
    r"(?:((?:19|20)\d\d)\s*年)?\s*(?:(1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])\s*月)?"
    r"(?:\s*(3[01]|[12]\d|0?[1-9])\s*[日号])?"
)
_ISO = re.compile(r"\b(\d{4})-(\d\d)-(\d\d)\b")


@dataclass(frozen=True)
class Period:
    """A stretch of days named by a question: a year, a month (of a year, or of any year) or
    one day."""

    year: int | None
    month: int | None = None
    day: int | None = None
    start: datetime.date | None = None  # for relative periods: the days themselves
    end: datetime.date | None = None

    def describe(self) -> str:
        """The period as a person reads it: "2026-11-02 to 2026-11-08", "June 2023", "16 June
        (any year)"."""
        if self.start is not None and self.end is not None:
            if self.start == self.end:
                return self.start.isoformat()
            return f"{self.start.isoformat()} to {self.end.isoformat()}"
        year = str(self.year) if self.year else "(any year)"
        if self.month is None:
            return year
        month = calendar.month_name[self.month]
        return f"{self.day} {month} {year}" if self.day else f"{month} {year}"

    def holds(self, when: datetime.date, slack_days: int = 0) -> bool:
        """Whether ``when`` is in the period, or at most ``slack_days`` after its end (what
        happened in June is often told in the first days of July)."""
        if self.start is not None and self.end is not None:
            lo, hi = self.start, self.end
        else:
            year = self.year or when.year
            if self.month is None:
                lo, hi = datetime.date(year, 1, 1), datetime.date(year, 12, 31)
            else:
                last = calendar.monthrange(year, self.month)[1]
                if self.day is None:
                    lo = datetime.date(year, self.month, 1)
                    hi = datetime.date(year, self.month, last)
                else:
                    lo = hi = datetime.date(year, self.month, min(self.day, last))
        return lo <= when <= hi + datetime.timedelta(days=slack_days)


def last_day(period: Period | None) -> datetime.date | None:
    """The last day of ``period`` (None: no period, or one without a year: "in May")."""
    if period is None:
        return None
    if period.end is not None:
        return period.end
    if period.year is None:
        return None
    if period.month is None:
        return datetime.date(period.year, 12, 31)
    last = calendar.monthrange(period.year, period.month)[1]
    return datetime.date(period.year, period.month, min(period.day or last, last))


def weight(period: Period, when: str | None) -> float:
    """What a hit said at ``when`` (an ISO date or time; None: unknown) counts for, against
    a question naming ``period``: ``WEIGHT`` when said in it or at most ``SLACK_DAYS`` after,
    else 1."""
    try:
        day = datetime.date.fromisoformat((when or "")[:10])
    except ValueError:
        return 1.0
    return WEIGHT if period.holds(day, SLACK_DAYS) else 1.0


def widened(query: str, k: int) -> tuple[Period | None, int]:
    """The period ``query`` names (None: none) and how many candidates a search of ``k``
    ranks before the period re-weighs them."""
    period = named_period(query)
    return period, k if period is None else max(k, CANDIDATES)


def in_period_first(hits: list[Hit], period: Period, k: int) -> list[Hit]:
    """The ``k`` best of memory search's hits (best first), re-weighed for a question naming
    ``period`` ("what did we decide in May"): a memory counts from when it was said (learned
    from a dated conversation), else from when it was written. Only the hits that can reach
    the ``k`` best once weighed are read (below the k-th score over ``WEIGHT``, none can)."""
    bar = hits[k - 1].score / WEIGHT if 0 < k <= len(hits) else 0.0
    out = []
    for i, hit in enumerate(hits):
        if i >= k and hit.score < bar:
            break
        try:
            mem = hit.memory
        except (MemdirError, OSError):
            out.append(hit)
            continue
        said = mem.extra.get("said")
        w = weight(period, said if isinstance(said, str) else hit.entry.created)
        if w != 1.0:
            hit = dataclasses.replace(hit, score=hit.score * w, read=_read_as(mem), weight=w)
        out.append(hit)
    out.sort(key=_by_score)  # stable: equal scores keep their order
    return out[:k]


def _read_as(mem: Memory) -> Callable[[Entry], Memory]:
    return lambda _entry: mem  # (read once already)


def _by_score(hit: Hit) -> float:
    return -hit.score


def named_period(text: str, today: datetime.date | None = None) -> Period | None:
    """The first period ``text`` names, or None (a month name only when it reads as one:
    "may" the verb is not May)."""
    iso = _ISO.search(text)
    if iso and (found := _day(int(iso[1]), int(iso[2]), int(iso[3]))) is not None:
        return found
    for pattern, day_at, month_at, year_at in (
        (_DAY_MONTH, 1, 2, 3),
        (_MONTH_DAY, 2, 1, 3),
        (_MONTH_YEAR, None, 1, 2),
    ):
        for m in pattern.finditer(text):
            word = m[month_at]
            if not _reads_as_month(text, m.start(month_at), word, bool(day_at or m[year_at])):
                continue
            month = _MONTHS[word.lower()]
            year = int(m[year_at]) if m[year_at] else None
            if not day_at:
                return Period(year, month)
            if (found := _day(year or 2000, month, int(m[day_at]))) is not None:
                return Period(year, month, found.day)  # (2000: a leap year, 29 February)
    alone = _YEAR_ALONE.search(text)
    if alone:
        return Period(int(alone[1]))
    now = today or datetime.date.today()
    rel = _RELATIVE.search(text)
    if rel:
        return _relative(_EN_KIND[rel[1].lower()], now)
    ago = _AGO.search(text)
    if ago:
        return _ago(_NUMBERS.get(ago[1].lower()) or int(ago[1]), ago[2].lower(), now)
    return _chinese(text, now) if _CJK.search(text) else None


_EN_KIND = {"the day before yesterday": "-2d", "yesterday": "-1d", "today": "0d",
            "this week": "0w", "last week": "-1w", "this month": "0m", "last month": "-1m",
            "this year": "0y", "last year": "-1y"}  # fmt: skip
_ZH_KIND = {"前天": "-2d", "昨天": "-1d", "今天": "0d", "本周": "0w", "这周": "0w",
            "这个星期": "0w", "上周": "-1w", "上个星期": "-1w", "上星期": "-1w", "本月": "0m",
            "这个月": "0m", "上个月": "-1m", "上月": "-1m", "今年": "0y", "去年": "-1y",
            "前年": "-2y"}  # fmt: skip
_CJK = re.compile(r"[\u4e00-\u9fff]")


def _relative(kind: str, now: datetime.date) -> Period:
    """A day, week (Monday to Sunday), month or year counted back from ``now``: ``-1w`` is
    last week."""
    back, unit = int(kind[:-1]), kind[-1]
    if unit == "d":
        day = now + datetime.timedelta(days=back)
        return Period(None, start=day, end=day)
    if unit == "w":
        monday = now - datetime.timedelta(days=now.weekday() - 7 * back)
        return Period(None, start=monday, end=monday + datetime.timedelta(days=6))
    if unit == "m":
        first = now.replace(day=1)
        for _ in range(-back):
            first = (first - datetime.timedelta(days=1)).replace(day=1)
        last = calendar.monthrange(first.year, first.month)[1]
        return Period(None, start=first, end=first.replace(day=last))
    return Period(now.year + back)


def _ago(n: int, unit: str, now: datetime.date) -> Period:
    """ "Three weeks ago": the stretch it names, as wide as its unit (a week, a month…), so a
    loose "a few weeks ago" still finds what was said around then."""
    days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit]
    centre = now - datetime.timedelta(days=n * days)
    half = datetime.timedelta(days=max(1, days // 2))  # ("three days ago": give or take one)
    return Period(None, start=centre - half, end=min(now, centre + half))


def _zh_number(word: str) -> int:
    return int(word) if word.isdigit() else _ZH_DIGITS.get(word, 0)


def _chinese(text: str, now: datetime.date) -> Period | None:
    """The first period a Chinese question names: 昨天, 上周, 去年, 三天前, 2023年5月, 五月…"""
    rel = _ZH_RELATIVE.search(text)
    if rel:
        return _relative(_ZH_KIND[rel[1]], now)
    ago = _ZH_AGO.search(text)
    if ago:
        unit = {"天": "day", "周": "week", "个星期": "week", "星期": "week", "个月": "month",
                "年": "year"}[ago[2]]  # fmt: skip
        return _ago(_zh_number(ago[1]), unit, now)
    for m in _ZH_DATE.finditer(text):
        year, month, day = m[1], m[2], m[3]
        if not (year or month):
            continue
        if month is None:
            return Period(int(year))
        number = _zh_number(month)
        if day is None:
            return Period(int(year) if year else None, number)
        if _day(int(year) if year else 2000, number, int(day)) is None:
            continue  # no such day
        return Period(int(year) if year else None, number, int(day))
    return None


def _reads_as_month(text: str, at: int, word: str, dated: bool) -> bool:
    """A month's name, not a word spelt like one: capitalised or beside a day or year ("the
    march" is not March); "May" and the short forms alone only after a word that introduces
    a time ("in May", not "May I")."""
    if dated:
        return True
    if not word[0].isupper():
        return False
    if len(word) > 3 and word.lower() != "may":
        return True
    before = text[:at].split()
    return bool(before) and before[-1].lower() in _TIME_WORDS


_TIME_WORDS = {"in", "of", "since", "during", "until", "till", "before", "after", "by", "early",
               "late", "mid", "last", "next", "this", "from", "to", "through"}  # fmt: skip


def _day(year: int, month: int, day: int) -> Period | None:
    try:
        datetime.date(year, month, day)
    except ValueError:  # 2023-02-30
        return None
    return Period(year, month, day)


def turns_in_period_first(
    ranked: list[tuple[str, float, bool]], period: Period
) -> list[tuple[str, float, bool]]:
    """The hits said in the period the question names weigh more (``periods.weight``); a
    file's name starts with the day its turns were said."""
    out = [(ref, score * weight(period, ref[:10]), close) for ref, score, close in ranked]
    out.sort(key=lambda r: (-r[1], r[0]))
    return out
