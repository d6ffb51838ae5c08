"""The period a question names: what was said then ranks above the same words said at
another time."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from memdir import MemoryStore
from memdir.config import Config
from memdir.find.periods import Period, named_period
from memdir.memory import Memory
from memdir.plan import Put

from conftest import CliFn

D = datetime.date


@pytest.mark.parametrize(
    ("question", "period"),
    [
        ("What exciting news did Maria share on 16 June, 2023?", Period(2023, 6, 16)),
        ("What did Melanie show Caroline on October 13, 2023?", Period(2023, 10, 13)),
        ("Who did Maria have dinner with on May 3, 2023?", Period(2023, 5, 3)),
        ("What did John share with Tim in January 2024?", Period(2024, 1)),
        ("When did Melanie go camping in June?", Period(None, 6)),
        ("What did we decide in May about the database?", Period(None, 5)),
        ("How many times did she go to the beach in 2023?", Period(2023)),
        ("why did the deploy on 2026-11-02 fail", Period(2026, 11, 2)),
        ("May I ask what you decided?", None),  # the verb
        ("who organised the march downtown", None),  # not capitalised, no day or year
        ("what is the port of the API", None),
        ("the deploy on 2023-02-30", None),  # no such day
    ],
)
def test_a_question_names_its_period(question: str, period: Period | None) -> None:
    assert named_period(question) == period


def test_relative_periods_count_back_from_today() -> None:
    today = D(2026, 12, 3)  # a Thursday
    assert named_period("what did we decide yesterday", today) == Period(
        None, start=D(2026, 12, 2), end=D(2026, 12, 2)
    )
    week = named_period("what broke last week?", today)
    assert week is not None and (week.start, week.end) == (D(2026, 11, 23), D(2026, 11, 29))
    month = named_period("the plan from last month", D(2026, 1, 15))
    assert month is not None and (month.start, month.end) == (D(2025, 12, 1), D(2025, 12, 31))


def test_a_period_holds_its_days_and_a_week_after() -> None:
    june = Period(None, 6)
    assert june.holds(D(2023, 6, 1)) and june.holds(D(2024, 6, 30))
    assert not june.holds(D(2023, 7, 3)) and june.holds(D(2023, 7, 3), slack_days=7)
    assert not june.holds(D(2023, 5, 31), slack_days=7)
    assert Period(2024, 2, 29).holds(D(2024, 2, 29)) and not Period(2023).holds(D(2024, 1, 1))


def test_the_turns_said_in_the_named_period_rank_first(tmp_path: Path) -> None:
    """The same words said in May and in June: a question about June gets June's turn first,
    one naming no period the better match of words."""
    from memdir.learn.conversation import keep_episodes
    from memdir.recall import episodes_for

    root = tmp_path / ".memory"
    store = MemoryStore(root, Config(dir=root, embedder="none", recall_episodes=1))
    may = [{"role": "user", "content": "Maria shared news, big news: she joined a gym."}]
    june = [{"role": "user", "content": "Maria shared some news today: she started a new job"
                                        " at the bank downtown."}]  # fmt: skip
    keep_episodes(store, may, "2023-05-10T10:00:00Z")
    keep_episodes(store, june, "2023-06-16T19:20:00Z")
    (plain,) = episodes_for(store, "What news did Maria share?")
    assert "gym" in plain.turn.text
    (then,) = episodes_for(store, "What news did Maria share on 16 June, 2023?")
    assert "new job" in then.turn.text and then.turn.said.startswith("2023-06-16")
    (later,) = episodes_for(store, "What news did Maria share in June?")
    assert "new job" in later.turn.text
    (other,) = episodes_for(store, "What news did Maria share in 2021?")
    assert "gym" in other.turn.text  # no turn is of that year: words decide


def decisions() -> list[Put]:
    """Two decisions about the database: the March one matches the words better, the May one
    was said in May (learned from a dated conversation)."""
    return [
        Put(Memory("db-postgres", "project_fact", "Database decision: keep the database on"
                   " Postgres", "We decided the database stays on Postgres, the database"
                   " team agreed.", extra={"said": "2026-03-04T10:00:00Z"})),
        Put(Memory("db-clickhouse", "project_fact", "Database decision: move reporting to"
                   " ClickHouse", "We decided reporting moves to ClickHouse next quarter, after"
                   " the analytics team has tried it on last year's events.",
                   extra={"said": "2026-05-12T10:00:00Z"})),
    ]  # fmt: skip


def _decisions(root: Path) -> MemoryStore:
    store = MemoryStore(root, Config(dir=root, embedder="none"))
    store.apply(decisions())
    return store


def test_memory_search_weighs_what_was_said_in_the_period_asked_about(tmp_path: Path) -> None:
    """A store's search and the scopes' search alike: the May decision first when the
    question names May, the better match of words otherwise; --explain says why."""
    from memdir.scopes import Scopes

    store = _decisions(tmp_path / ".memory")
    plain = [h.name for h in store.search("what did we decide about the database", 2)]
    assert plain == ["db-postgres", "db-clickhouse"]
    asked = "what did we decide about the database in May"
    for hits in (store.search(asked, 2), Scopes.of(store).search(asked, 2)):
        assert [h.name for h in hits] == ["db-clickhouse", "db-postgres"]
        assert [h.weight for h in hits] == [1.2, 1.0]
        assert hits[0].memory.name == "db-clickhouse"  # read once, still readable
    assert [h.name for h in store.search("what did we decide about the database in 2025", 2)] == [
        "db-postgres",
        "db-clickhouse",
    ]


def test_a_hand_written_memory_counts_from_when_it_was_written(tmp_path: Path) -> None:
    root = tmp_path / ".memory"
    store = _decisions(root)
    (root / "db-backups.md").write_text(
        "---\nname: db-backups\ntype: project_fact\ndescription: 'Database decision: nightly"
        " backups'\ncreated: '2026-06-02T09:00:00Z'\nupdated: '2026-06-02T09:00:00Z'\n---\n"
        "We decided the database is backed up nightly.\n",
        encoding="utf-8",
    )
    store = MemoryStore(root, Config(dir=root, embedder="none"))
    assert store.search("what did we decide about the database in June", 1)[0].name == "db-backups"


def test_memdir_search_explain_shows_the_period_weight(cli: CliFn, tmp_path: Path) -> None:
    _decisions(tmp_path / ".memory")  # the store the cli fixture points at
    r = cli("search", "--explain", "what did we decide about the database in May")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    first = next(i for i, line in enumerate(lines) if "db-clickhouse" in line)
    assert "said in the period asked about: ×1.2" in lines[first + 1]
    assert "×" not in lines[next(i for i, line in enumerate(lines) if "db-postgres" in line) + 1]
    assert "period asked about: May (any year)" in r.out
    r = cli("recall", "--no-llm", "--explain", "what did we decide about the database in May")
    assert r.code == 0, r.err
    assert "period asked about: May (any year) (what was said then" in r.out
    r = cli("search", "--explain", "what did we decide about the database")
    assert "period asked about" not in r.out


def test_only_the_hits_that_can_reach_the_best_once_weighed_are_read() -> None:
    """Below the k-th score over the weight, no hit can reach the k best: those are not read
    (each read is a file, or a database round trip)."""
    from memdir.entry import Entry, Hit
    from memdir.find.periods import in_period_first

    read: list[str] = []

    def reader(entry: Entry) -> Memory:
        read.append(entry.name)
        said = "2026-05-03T10:00:00Z" if entry.name in ("c", "e") else "2026-01-01T10:00:00Z"
        return Memory(entry.name, "project_fact", "d", "b", extra={"said": said})

    hits = [
        Hit(Entry(n, "project_fact", "d", None, None, False, f"{n}.md"), score, read=reader)
        for n, score in (("a", 10.0), ("b", 9.0), ("c", 8.0), ("d", 5.0), ("e", 1.0))
    ]
    best = in_period_first(hits, Period(None, 5), 2)
    assert [(h.name, h.weight) for h in best] == [("a", 1.0), ("c", 1.2)]
    assert read == ["a", "b", "c"]  # 9 / 1.2 = 7.5: "d" (5) and "e" (1) cannot reach the two


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("what did we ship today?", D(2026, 12, 3), D(2026, 12, 3)),
        ("the bug from the day before yesterday", D(2026, 12, 1), D(2026, 12, 1)),
        ("what changed this week", D(2026, 11, 30), D(2026, 12, 6)),
        ("what did we decide this month", D(2026, 12, 1), D(2026, 12, 31)),
        ("three days ago we moved the API", D(2026, 11, 29), D(2026, 12, 1)),
        ("a few weeks ago Maria said", D(2026, 11, 9), D(2026, 11, 15)),
        ("昨天我们决定了什么？", D(2026, 12, 2), D(2026, 12, 2)),
        ("上周部署失败的原因", D(2026, 11, 23), D(2026, 11, 29)),
        ("上个月的计划", D(2026, 11, 1), D(2026, 11, 30)),
        ("三天前说的端口", D(2026, 11, 29), D(2026, 12, 1)),
        ("几周前提到的数据库", D(2026, 11, 9), D(2026, 11, 15)),
    ],
)
def test_relative_periods_in_english_and_chinese(question: str, start: D, end: D) -> None:
    """Relative periods count from the reference date given (a Thursday here), in English
    and in Chinese; "a few" and 几 read as three."""
    got = named_period(question, D(2026, 12, 3))
    assert got is not None and (got.start, got.end) == (start, end)


@pytest.mark.parametrize(
    ("question", "period"),
    [
        ("去年的旅行", Period(2025)),
        ("this year's roadmap", Period(2026)),
        ("last year we used Jenkins", Period(2025)),
        ("2023年5月的会议", Period(2023, 5)),
        ("五月说了什么", Period(None, 5)),
        ("2023年的预算", Period(2023)),
        ("6月16日的新闻", Period(None, 6, 16)),
    ],
)
def test_named_years_months_and_days_in_chinese(question: str, period: Period) -> None:
    assert named_period(question, D(2026, 12, 3)) == period


@pytest.mark.parametrize(
    "text",
    [
        "set up pre-commit with ruff and black",
        "which port does the API use?",
        "我喜欢用制表符缩进",
        "请用简体中文回复我",
        "what did Caroline paint?",
        "the 2 of us went hiking",
    ],
)
def test_date_free_text_names_no_period(text: str) -> None:
    assert named_period(text, D(2026, 12, 3)) is None
