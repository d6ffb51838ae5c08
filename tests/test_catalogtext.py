"""A first search of many never-seen files ranks by the catalogue (names and descriptions) at
once and leaves their text to a background indexer; the ranking it gives is the search
index's over those two columns, and once the index is built, bodies count again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memdir import MemoryStore
from memdir.background import indexed as _indexed
from memdir.catalogtext import CatalogText
from memdir.config import Config
from memdir.layout import state_dir
from memdir.memory import Memory
from memdir.plan import Put
from memdir.search import Doc, SearchIndex, tokenize

from conftest import CliFn

ROWS = [
    ("a.md", "db-index", "Indexes on the orders table speed up queries"),
    ("b.md", "reindex-job", "Nightly reindex job of the search cluster"),
    ("c.md", "query-cache", "A query cache sits before the database"),
    ("d.md", "dying-disks", "Dying disks are replaced before they die"),
    ("e.md", "users-note", "The user's settings live in users.json"),
    ("f.md", "on-call", "The on_call rota changes every Monday; INDEX reviews"),
    ("g.md", "zh-db", "数据库索引很重要"),
    ("h.md", "wide-letters", "ｉｎｄｅｘ written in full-width letters"),
    ("i.md", "indexing-guide", "Indexing guide: indexed columns, indexer settings"),
    ("j.md", "unrelated", "Lunch is at noon on Fridays"),
    ("k.md", "stand-up", "Stand-up at nine o'clock sharp"),
]
QUERIES = [
    "index", "indexes for queries", "die", "dying", "user settings", "call rota", "数据库",
    "索引 index", "monday review", "noon lunch friday", "nothing matches this", "oclock",
    "o'clock stand",
]  # fmt: skip


def _both(rows: list[tuple[str, str, str]]) -> tuple[CatalogText, SearchIndex]:
    index = SearchIndex()
    index.update(Doc(key, None, name, desc, "") for key, name, desc in rows)
    return CatalogText(rows), index


@pytest.mark.parametrize("query", QUERIES)
def test_the_catalogue_finds_each_term_where_the_search_index_does(query: str) -> None:
    """Stems (indexes, queries, dying -> die), a word inside a longer one (reindex is not
    index), underscores, apostrophes, case, full-width letters and Chinese bigrams: every
    term is found in the memories, and only those, where the search index finds it."""
    catalogue, index = _both(ROWS)
    terms = list(dict.fromkeys(tokenize(query)))
    assert catalogue.stats(terms)[0] == index.stats(terms)[0]
    assert {k for k, _ in catalogue.search(query, 10)} == {k for k, _ in index.search(query, 10)}


def test_its_scores_are_the_search_index_s_over_names_and_descriptions() -> None:
    """Where a memory's words are its index terms (no stop words, one space between), the
    catalogue scores every memory exactly as the search index does without bodies."""
    import random

    rng = random.Random(7)
    words = "deploy staging cache redis tabs latency metrics release branch flag".split()
    rows = [
        (f"m{i}.md", f"note-{i}", " ".join(rng.choices(words, k=rng.randint(2, 9))))
        for i in range(300)
    ]
    catalogue, index = _both(rows)
    for query in ("deploy redis", "release branch flag", "latency", "tabs metrics cache"):
        ours = [(k, round(s, 9)) for k, s in catalogue.search(query, 300)]
        theirs = [(k, round(s, 9)) for k, s in index.search(query, 300)]
        assert sorted(ours) == sorted(theirs) and len(ours) > 5
        assert [s for _, s in ours] == sorted((s for _, s in ours), reverse=True)


def _indexer_done(root: Path, n: int, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while _indexed(state_dir(root) / "search.sqlite") < n:
        if time.monotonic() > end:
            raise AssertionError("the background indexer never indexed the store")
        time.sleep(0.2)


def test_a_first_search_of_many_never_seen_files_is_left_to_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over more never-indexed memories than a search indexes itself: it answers from names
    and descriptions and says so, a memory written meanwhile is found at once, a real
    ``memdir index --background`` builds the index, and the next searches find bodies too
    (the memory written meanwhile included)."""
    monkeypatch.setattr("memdir.lookup.DEFER_TEXT_AT", 50)
    monkeypatch.setenv("MEMDIR_EMBEDDER", "none")  # (the background indexer's)
    root = tmp_path / ".memory"
    MemoryStore(root, Config(dir=root, embedder="none")).apply(
        [Put(Memory(f"note-{i}", "project_fact", f"Note {i} on topic {i % 7}", "Details."))
         for i in range(200)]
        + [Put(Memory("harbour", "project_fact", "Where the boats are", "Kept in Zanzibar."))]
    )  # fmt: skip
    (state_dir(root) / "search.sqlite").unlink(missing_ok=True)  # never indexed

    store = MemoryStore(root, Config(dir=root, embedder="none"))
    hits = store.search("topic 5", k=3)
    assert hits and all("topic 5" in h.entry.description for h in hits)
    note = store.ranking_note()
    assert "names and descriptions alone" in note and "201 memories" in note
    assert store.search("zanzibar") == []  # a body's word: not before the index is built
    store.write("ferry", type="project_fact", description="The ferry to Zanzibar", body="Daily.")
    assert [h.name for h in store.search("zanzibar ferry", k=1)] == ["ferry"]

    _indexer_done(root, 201)  # what the first search started (the write came after it)
    assert {h.name for h in store.search("zanzibar", k=5)} == {"harbour", "ferry"}
    assert "names and descriptions" not in store.ranking_note()
    assert _indexed(state_dir(root) / "search.sqlite") == 202
    assert store.embedding_backlog == 0  # nothing left for a background indexer to do


def test_below_the_threshold_and_for_memdir_index_the_text_is_indexed_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store with fewer never-indexed memories than the threshold is indexed by its first
    search, bodies included, and ``embed_all`` (``memdir index``) never leaves the text to
    anyone else."""
    root = tmp_path / ".memory"
    MemoryStore(root, Config(dir=root, embedder="none")).apply(
        [Put(Memory(f"n-{i}", "project_fact", f"Note {i}", f"Body word{i}.")) for i in range(80)]
    )
    (state_dir(root) / "search.sqlite").unlink(missing_ok=True)
    plain = Config(dir=root, embedder="none")
    assert [h.name for h in MemoryStore(root, plain).search("word7", k=1)] == ["n-7"]

    (state_dir(root) / "search.sqlite").unlink()
    monkeypatch.setattr("memdir.lookup.DEFER_TEXT_AT", 10)
    store = MemoryStore(root, plain)
    store.embed_all()
    assert _indexed(state_dir(root) / "search.sqlite") == 80
    assert [h.name for h in store.search("word7", k=1)] == ["n-7"]
    assert "names and descriptions" not in store.ranking_note()


def test_the_command_says_the_text_is_indexed_in_the_background(
    cli: CliFn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``memdir search`` over many never-indexed memories answers from the catalogue and says
    on stderr that their text is being indexed (not embedded: no embedder here)."""
    monkeypatch.setattr("memdir.lookup.DEFER_TEXT_AT", 20)
    monkeypatch.setenv("MEMDIR_EMBEDDER", "none")
    root = tmp_path / ".memory"
    MemoryStore(root, Config(dir=root, embedder="none")).apply(
        [Put(Memory(f"n-{i}", "project_fact", f"Note {i} on port {8000 + i}", "x."))
         for i in range(60)]
    )  # fmt: skip
    (state_dir(root) / "search.sqlite").unlink(missing_ok=True)
    r = cli("search", "port 8007", "--explain")
    assert r.code == 0 and "n-7" in r.out
    assert "names and descriptions alone" in r.out + r.err
    assert "60 memories are being indexed in the background" in r.err
    assert "embedded" not in r.err
    _indexer_done(root, 60)


def test_an_index_kept_in_memory_is_built_by_the_search_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the search index cannot be a file of the store (its path is a link, so it is kept
    in memory), no background indexer could build it: the first search indexes the text."""
    monkeypatch.setattr("memdir.lookup.DEFER_TEXT_AT", 10)
    root = tmp_path / ".memory"
    MemoryStore(root, Config(dir=root, embedder="none")).apply(
        [Put(Memory(f"n-{i}", "project_fact", f"Note {i}", f"Body word{i}.")) for i in range(40)]
    )
    (state_dir(root) / "search.sqlite").unlink(missing_ok=True)
    (state_dir(root) / "search.sqlite").symlink_to(tmp_path / "elsewhere.sqlite")
    store = MemoryStore(root, Config(dir=root, embedder="none"))
    assert [h.name for h in store.search("word7", k=1)] == ["n-7"]
    assert "names and descriptions" not in store.ranking_note()
    assert not (tmp_path / "elsewhere.sqlite").exists()


def test_a_background_indexer_finding_another_at_work_leaves_without_opening_the_store(
    tmp_path: Path,
) -> None:
    """Commands and hooks start ``memdir index --background`` after each call while a backlog
    is left; when one is already at work (it holds the embedding lock) the new one leaves at
    once, before opening the store (seconds at 100,000 memories): MEMORY.md is not even
    brought up to date by it. Once the lock is free, it does its work."""
    import subprocess
    import sys

    import filelock

    from conftest import child_env

    root = tmp_path / ".memory"
    MemoryStore(root, Config(dir=root, embedder="none")).write(
        "api-port", type="project_fact", description="The API listens on 8080", body="8080."
    )
    (root / "by-hand.md").write_text(
        "---\nname: by-hand\ntype: project_fact\ndescription: Written by hand\n---\nHello.\n"
    )
    env = {**child_env(), "MEMDIR_EMBEDDER": "none"}
    command = [sys.executable, "-m", "memdir", "--dir", str(root), "index", "--background"]
    with filelock.FileLock(str(state_dir(root) / "embedding.lock"), timeout=0):
        r = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stderr == ""
        assert "by-hand" not in (root / "MEMORY.md").read_text()  # not opened
    r = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    assert "by-hand" in (root / "MEMORY.md").read_text()
    assert _indexed(state_dir(root) / "search.sqlite") == 2
