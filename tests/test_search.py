"""Full-text search: CJK and English tokenising, BM25 ranking, incremental upkeep."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memdir import MemoryStore
from memdir.disk.layout import state_dir
from memdir.find.search import Doc, SearchIndex, tokenize

from conftest import CliFn


@pytest.fixture
def zh(store: MemoryStore) -> MemoryStore:
    store.write(
        "user-language-preference",
        type="user_preference",
        description="用户偏好用中文交流和回复",
        body="用户希望所有回复使用简体中文。",
    )
    store.write(
        "prefer-pytest",
        type="user_preference",
        description="User runs tests with pytest",
        body="Always use pytest, never unittest.",
    )
    store.write(
        "deploy-target",
        type="project_fact",
        description="Production runs on Kubernetes",
        body="Deploys go through Argo CD to the prod cluster.",
    )
    return store


@pytest.mark.parametrize("query", ["中文", "简体中文回复", "用中文回复我", "请用简体中文"])
def test_chinese_words_of_two_characters_find_the_memory(zh: MemoryStore, query: str) -> None:
    """Chinese queries match by character bigrams, without a dictionary."""
    assert zh.search(query, 1)[0].memory.name == "user-language-preference"


def test_english_stemming_and_stop_words(zh: MemoryStore) -> None:
    """'testing' finds 'tests'; stop words alone find nothing."""
    assert zh.search("how should I be testing this?", 1)[0].memory.name == "prefer-pytest"
    assert zh.search("the and of to", 5) == []
    assert tokenize("Running the tests") == ["run", "test"]


def test_mixed_language_query(zh: MemoryStore) -> None:
    """A query mixing English and Chinese ranks both memories it touches."""
    names = [h.memory.name for h in zh.search("deploy 到 kubernetes 用中文", 3)]
    assert set(names[:2]) == {"deploy-target", "user-language-preference"}


def test_japanese_and_korean_are_searchable(store: MemoryStore) -> None:
    """Kana and Hangul runs are bigram-indexed too."""
    store.write("ja", type="user_preference", description="ユーザーは日本語で返信を希望", body="")
    store.write("ko", type="user_preference", description="사용자는 한국어 답변을 선호", body="")
    assert store.search("日本語", 1)[0].memory.name == "ja"
    assert store.search("한국어", 1)[0].memory.name == "ko"


def test_description_weighs_more_than_body(store: MemoryStore) -> None:
    """The same word in a description outranks it in a body."""
    store.write("in-body", type="project_fact", description="Notes", body="We use postgres here.")
    store.write("in-desc", type="project_fact", description="Database is postgres", body="Notes.")
    assert [h.memory.name for h in store.search("postgres", 2)] == ["in-desc", "in-body"]


def test_index_follows_writes_hand_edits_and_deletes(zh: MemoryStore) -> None:
    """Writes, hand edits and deletions are reflected on the next search."""
    assert zh.search("Argo", 1)[0].memory.name == "deploy-target"
    path = zh.root / "deploy-target.md"
    path.write_text(path.read_text().replace("Argo CD", "Flux"))
    os.utime(path, (1, 1))
    fresh = MemoryStore(zh.root)
    assert (
        fresh.search("Argo", 1) == [] and fresh.search("Flux", 1)[0].memory.name == "deploy-target"
    )
    fresh.delete("deploy-target")
    assert fresh.search("Flux", 1) == []


def test_deleted_or_damaged_index_rebuilds_itself(zh: MemoryStore) -> None:
    """The SQLite file is a cache: deleting or corrupting it loses nothing."""
    db = zh.internal / "index.sqlite"
    assert zh.search("pytest", 1)
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    assert MemoryStore(zh.root).search("pytest", 1)[0].memory.name == "prefer-pytest"
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    db.write_bytes(b"this is not a database" * 100)
    assert MemoryStore(zh.root).search("pytest", 1)[0].memory.name == "prefer-pytest"


def test_candidates_from_rarer_terms_score_like_a_full_ranking() -> None:
    """Leaving common terms out of candidate gathering keeps the top scores of scoring all,
    and a query whose informative terms find fewer than k documents is widened with the next
    rarest terms, so it still returns k results."""
    docs = [
        Doc(
            f"d{i}",
            None,
            f"doc-{i}",
            f"common word{i % 3} topic{i % 7}",
            f"common filler text number{i} shared{i % 2}",
        )
        for i in range(60)
    ]
    every, pruned = (
        SearchIndex(candidates=60),
        SearchIndex(candidate_share=0.2, min_postings=0, candidates=60),
    )
    every.update(docs)
    pruned.update(docs)
    for q in ("common topic3 word1", "shared0 number7 common", "topic5 filler"):
        a = [round(s, 9) for _, s in every.search(q, 5)]
        b = [round(s, 9) for _, s in pruned.search(q, 5)]
        assert len(b) == len(a) == 5 and b == a  # the same five, in the same order
    assert len(every.search("common", 100)) == 60  # a query of common terms alone still works


def test_search_cli(cli: CliFn) -> None:
    """`memdir search` prints ranked results, JSON with --json, and says when nothing matched."""
    cli(
        "add",
        "user-language-preference",
        "--type",
        "user_preference",
        "-d",
        "用户偏好用中文交流和回复",
        "--body",
        "用户希望所有回复使用简体中文。",
    )
    r = cli("search", "简体中文回复", "--json")
    assert r.code == 0 and json.loads(r.out)[0]["name"] == "user-language-preference"
    assert "user-language-preference" in cli("search", "中文").out
    assert cli("search", "nothing-like-this").out == "No matching memories.\n"
    assert cli("search").code == 2


@pytest.mark.slow
@pytest.mark.parametrize("cache", ["index.sqlite"])
def test_a_damaged_cache_is_rebuilt(cli: CliFn, tmp_path: Path, cache: str) -> None:
    """Random bytes over the middle of a cache (a power cut with synchronous=OFF): doctor
    says so and --fix rebuilds it; a search that meets it rebuilds it and answers."""
    from memdir.memory import Memory
    from memdir.plan import Put

    store = MemoryStore(tmp_path / ".memory")
    words = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma".split()
    store.apply(
        [
            Put(
                Memory(
                    f"note-{i}",
                    "project_fact",
                    f"Note {i} about {words[i % 10]}",
                    " ".join(words[(i + j) % 10] for j in range(300)),
                )
            )
            for i in range(40)
        ]
    )
    assert cli("search", "kappa").code == 0  # builds both caches
    path = state_dir(tmp_path / ".memory") / cache

    def damage() -> None:
        import sqlite3

        store.close()
        db = sqlite3.connect(str(path))  # everything into the file, then damage its middle
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
        data = bytearray(path.read_bytes())
        middle = len(data) // 2
        data[middle : middle + 8192] = os.urandom(min(8192, len(data) - middle))
        path.write_bytes(bytes(data))
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)

    damage()
    r = cli("doctor")
    assert f"{path}: damaged cache" in r.out and "doctor --fix" in r.out
    r = cli("doctor", "--fix")
    assert f"removed the damaged cache {path}" in r.out
    assert "damaged cache" not in cli("doctor").out
    assert cli("search", "kappa").code == 0
    damage()
    import subprocess
    import sys

    from conftest import child_env

    def memdir(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memdir", "--dir", str(store.root), *args],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=120,
        )

    r = memdir("search", "lambda", "--json")
    assert r.returncode == 0, r.stderr
    assert any(row["name"].startswith("note-") for row in json.loads(r.stdout))
    damage()
    r = memdir("recall", "--no-llm", "tell me about lambda")
    assert r.returncode == 0 and "<relevant_memories>" in r.stdout, r.stderr


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_plain_english_is_split_as_every_language_is(text: str) -> None:
    """The fast path for ASCII text finds the very words the general rule finds."""
    from memdir.find.search import _ASCII_TOKEN, _TOKEN

    lowered = text.lower()
    assert _ASCII_TOKEN.findall(lowered) == _TOKEN.findall(lowered)
