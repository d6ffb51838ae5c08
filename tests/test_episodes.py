"""Episodes: the conversations memdir learns from, kept as dated turns, found again by recall
beside the memories extracted from them."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import sqlite3
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memdir import MemoryStore
from memdir.config import Config
from memdir.disk.layout import state_dir
from memdir.episodes import Episodes
from memdir.errors import LLMError
from memdir.find.search import tokenize
from memdir.learn.extract import extract_memories
from memdir.memory import Memory
from memdir.plan import Put
from memdir.providers import ChatModel
from memdir.recall import load_memories, select
from memdir_agent.loop import agent_loop
from memdir_agent.tools import Tools
from memdir_agent.worker import MemoryWorker
from memdir_testing import FakeModel
from test_recall import TopicEmbedder

from conftest import CliFn
from fakeserver import FakeLLMServer, reply

GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
TALK = [
    {"role": "user", "content": "Let's settle the database migration: we go with Alembic."},
    {"role": "assistant", "content": "Agreed — Alembic for migrations, autogenerate off."},
    {"role": "user", "content": f"Also the CI token is {GHP}, keep it out of the repo."},
    {"role": "assistant", "content": "Understood."},
]
LEARNED = {
    "memories": [
        {
            "action": "create",
            "name": "migrations-alembic",
            "type": "project_fact",
            "description": "Database migrations use Alembic",
            "body": "Decided with the user: Alembic, autogenerate off.",
        }
    ]
}


def test_what_was_said_is_kept_and_learned_memories_point_to_it(store: MemoryStore) -> None:
    """What was said is kept and learned memories point to it."""
    extract_memories(store, TALK, FakeModel([LEARNED]), said_at="2026-11-24T10:00:00Z")
    folder = store.internal / "episodes"
    (path,) = folder.iterdir()
    assert path.name.startswith("2026-11-24-") and stat.S_IMODE(path.stat().st_mode) == 0o600
    turns = [json.loads(line) for line in path.read_text().splitlines()]
    assert [t["n"] for t in turns] == [0, 1] and turns[0]["who"] == ["user", "assistant"]
    assert "Alembic for migrations, autogenerate off" in turns[0]["text"]
    assert GHP not in path.read_text() and "[REDACTED" in turns[1]["text"]
    mem = store.get("migrations-alembic")
    assert mem.extra["episode"] == f"{path.name}#0-1"
    assert "episode" not in store.index_path.read_text() and "2026-11-24" not in (
        store.index_path.read_text()
    )
    # the next extraction of the same conversation adds only the new turn
    more = [*TALK, {"role": "user", "content": "And migrations run in CI before deploy."}]
    extract_memories(store, more, FakeModel([{"memories": []}]), said_at="2026-11-24T10:05:00Z")
    assert len(path.read_text().splitlines()) == 3


def test_recall_finds_the_decision_in_an_episode(
    tmp_path: Path, llm_server: FakeLLMServer, server_model: ChatModel
) -> None:
    """ "What did we decide about X last week?" is answered from what was said, with its date,
    through the real SDK against the fake server."""
    root = tmp_path / ".memory"
    store = MemoryStore(root, Config(dir=root, embedder="none"))
    store.write("tabs", type="user_preference", description="User indents with tabs")
    llm_server.queue(reply(json.dumps({"memories": []})))  # the model learned nothing
    extract_memories(store, TALK, server_model, said_at="2026-11-24T10:00:00Z")
    llm_server.queue(reply(json.dumps({"selected": []})))
    ask = [{"role": "user", "content": "What did we decide about the database migration?"}]
    sel = select(store, ask, server_model)
    # the turn that matched comes with the one said after it, as one span
    assert sel.names == [] and [e.turn.ref.endswith("#0-1") for e in sel.episodes] == [True]
    llm_server.queue(reply(json.dumps({"selected": []})))
    block = load_memories(store, ask, server_model)
    assert '<episode said="24 November 2026" who="user, assistant"' in block
    assert "we go with Alembic" in block and "An <episode> is what was said" in block
    assert "keep it out of the repo" in block and GHP not in block
    # a question about something never said brings no episode
    llm_server.queue(reply(json.dumps({"selected": ["tabs"]})))
    block = load_memories(store, [{"role": "user", "content": "how do I indent?"}], server_model)
    assert 'name="tabs"' in block and "<episode" not in block
    off = Config(dir=root, embedder="none", episodes=False)
    assert select(MemoryStore(root, off), ask).episodes == []


def test_episodes_off_keeps_nothing(tmp_path: Path) -> None:
    """With episodes off, nothing said is kept."""
    root = tmp_path / ".memory"
    store = MemoryStore(root, Config(dir=root, episodes=False))
    extract_memories(store, TALK, FakeModel([LEARNED]))
    assert not (store.internal / "episodes").exists()
    assert "episode" not in store.get("migrations-alembic").extra


def test_old_and_oversized_episodes_go_and_the_index_follows(tmp_path: Path) -> None:
    """Old and oversized episodes go and the index follows."""
    internal = state_dir(tmp_path)
    config = Config(episodes_keep_days=30, episodes_max_bytes=600)
    episodes = Episodes(internal, config)
    old = (datetime.date.today() - datetime.timedelta(days=400)).isoformat()
    episodes.record([("user", "the blue deploy pipeline")], conversation="a1", said_at=old)
    (kept,) = (internal / "episodes").iterdir()  # said long ago, kept today: it stays
    month = time.time() - 45 * 86400
    os.utime(kept, (month, month))  # kept 45 days ago: past 30 days, it goes
    episodes.prune()
    assert not list((internal / "episodes").iterdir())
    for i in range(6):
        episodes.record(
            [("user", f"release train number {i} leaves on friday " + "x" * 80)],
            conversation=f"b{i}",
        )
    files = sorted((internal / "episodes").iterdir())
    assert sum(p.stat().st_size for p in files) <= 600 and len(files) < 6
    kept = episodes.search("release train friday", 10)
    assert kept and all((internal / "episodes" / s.turn.ref.split("#")[0]).exists() for s in kept)
    os.unlink(files[-1])  # a person deletes a file: its turns are not found any more
    assert all(s.turn.ref.split("#")[0] != files[-1].name for s in episodes.search("release"))
    episodes.close()


def test_memdir_recall_shows_episodes(cli: CliFn, tmp_path: Path) -> None:
    """memdir recall shows the episodes it found."""
    store = MemoryStore(tmp_path / ".memory")
    extract_memories(store, TALK, FakeModel([{"memories": []}]), said_at="2026-11-24")
    r = cli("recall", "--no-llm", "what did we decide about the database migration?")
    assert r.code == 0 and '<episode said="24 November 2026"' in r.out
    assert "we go with Alembic" in r.out


def test_tool_work_is_not_kept_as_turns(store: MemoryStore) -> None:
    """An agent's tool calls and their results are work, not conversation: one turn is kept,
    with what the user said and what the assistant answered."""
    talk = [
        {"role": "user", "content": "We deploy with Argo CD from now on."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Noted: Argo CD."}]},
    ]
    extract_memories(store, talk, FakeModel([{"memories": []}]))
    (turn,) = Episodes(store.internal, store.config).turns()
    assert turn.text == "user: We deploy with Argo CD from now on.\nassistant: Noted: Argo CD."


class CountingTopics(TopicEmbedder):
    """The topic embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        self.embedded = 0

    def embed(self, texts: list[str]) -> object:
        self.embedded += len(texts)
        return super().embed(texts)


def test_episodes_are_found_by_meaning_and_their_vectors_follow_the_files(
    tmp_path: Path,
) -> None:
    """With an embedder, a turn that shares no word with the question but means it is found;
    its vectors are made once, and go when its file goes."""
    root = tmp_path / ".memory"
    store = MemoryStore(root, Config(dir=root, embedder="none"))
    episodes = Episodes(store.internal, store.config)
    episodes.record(
        [("user", "We indent with tabs everywhere."), ("assistant", "Tabs it is.")],
        conversation="a1",
        said_at="2026-11-20T09:00:00Z",
    )
    episodes.record(
        [("user", "Prod deploys go to Kubernetes on friday.")],
        conversation="b2",
        said_at="2026-11-21T09:00:00Z",
    )
    question = "how wide is the leading whitespace?"
    assert episodes.search(question, 2) == []  # no word in common: BM25 finds nothing
    topics = CountingTopics()
    (hit, *_) = episodes.search(question, 2, embedder=topics)  # type: ignore[arg-type]
    assert hit.close and hit.matched == 0 and "indent with tabs" in hit.turn.text
    assert topics.embedded == 3  # the two turns and the question
    episodes.search(question, 2, embedder=topics)  # type: ignore[arg-type]
    assert topics.embedded == 3  # nothing new was said, the same question: nothing embedded
    episodes.search("how wide are the tabs?", 2, embedder=topics)  # type: ignore[arg-type]
    assert topics.embedded == 4  # a new question: only it is embedded
    # recall uses the store's embedder; the close turn passes without shared words
    given = MemoryStore(root, Config(dir=root, embedder="none"), embedder=topics)  # type: ignore[arg-type]
    (said,) = select(given, [{"role": "user", "content": question}]).episodes
    assert said.turn.said.startswith("2026-11-20") and "Tabs it is" in said.turn.text
    tabs = next(
        p for p in (store.internal / "episodes").iterdir() if p.name.startswith("2026-11-20")
    )
    os.unlink(tabs)  # a person deletes what was said: no vector of it is kept either
    assert all("tabs" not in s.turn.text for s in episodes.search(question, 2, embedder=topics))  # type: ignore[arg-type]
    episodes.close()
    with sqlite3.connect(store.internal / "index.sqlite") as db:
        assert db.execute("SELECT count(*) FROM episode_vecs").fetchone()[0] == 1


def test_what_was_said_is_kept_once_whatever_the_model_does(store: MemoryStore) -> None:
    """Turns are kept before the memory model is asked: searchable when it fails, not kept
    again when the next extraction reads the same messages, and what that one learns still
    points back to them."""
    with pytest.raises(LLMError):
        extract_memories(store, TALK, FakeModel([LLMError("the model is down")]))
    episodes = Episodes(store.internal, store.config)
    assert [s.turn.ref[-2:] for s in episodes.search("database migration alembic")] == ["#0"]
    extract_memories(store, TALK, FakeModel([LEARNED]))
    assert len(episodes.turns()) == 2  # not kept twice
    (path,) = (store.internal / "episodes").iterdir()
    assert store.get("migrations-alembic").extra["episode"] == f"{path.name}#0-1"
    episodes.close()


def test_the_agent_keeps_the_turn_before_its_extraction_runs(tmp_path: Path) -> None:
    """What was said in an agent's turn is searchable as soon as the turn ends, while its
    extraction is still waiting for the memory model (or handed over to the next session)."""
    root = tmp_path / ".memory"
    store = MemoryStore(root, Config(dir=root, embedder="none"))
    release = threading.Event()

    def slow(call: object) -> object:
        release.wait(30)
        return {"memories": []}

    worker = MemoryWorker(lambda kind, text: None)
    messages: list[Any] = [{"role": "user", "content": "We settle on Alembic for migrations."}]
    agent_loop(
        messages,
        store=store,
        model=FakeModel(["Alembic it is, autogenerate off."]),
        memory_model=FakeModel(default=slow),
        tools=Tools(tmp_path, store),
        worker=worker,
    )
    ask = [{"role": "user", "content": "which tool did we settle on for migrations?"}]
    (said,) = select(MemoryStore(root, store.config), ask).episodes  # extraction still waits
    assert "Alembic for migrations" in said.turn.text and "autogenerate off" in said.turn.text
    release.set()
    assert worker.drain(10)
    assert len(Episodes(store.internal, store.config).turns()) == 1  # kept once


def test_extraction_embeds_what_it_kept(tmp_path: Path) -> None:
    """Where the store has its embedder already (an agent that searched), extraction embeds
    the turns it kept, and a recall embeds only its question; where it has none, extraction
    loads no model for them (the turn ends at once) and the next recall embeds them."""
    topics = CountingTopics()
    ask = [{"role": "user", "content": "what did we decide about the database migration?"}]
    for has_it in (True, False):
        root = tmp_path / str(has_it) / ".memory"
        if has_it:  # an agent that searched: the store has its embedder
            store = MemoryStore(root, Config(dir=root), embedder=topics)  # type: ignore[arg-type]
        else:  # a learn worker with no model loaded
            store = MemoryStore(root, Config(dir=root, embedder="none"))
        topics.embedded = 0
        extract_memories(store, TALK, FakeModel([{"memories": []}]))
        assert topics.embedded == (2 if has_it else 0)
        later = MemoryStore(root, Config(dir=root), embedder=topics)  # type: ignore[arg-type]
        (said,) = select(later, ask).episodes  # the next recall, with the embedder
        assert "we go with Alembic" in said.turn.text
        # the turns the worker did not embed, and the question once (the embedder keeps it)
        assert topics.embedded == (3 if has_it else 2)


def test_a_damaged_index_is_rebuilt_from_the_files_memories_and_episodes(
    store: MemoryStore,
) -> None:
    """The store's index, which holds the episodes' parts too, damaged: the episodes are found
    again (rebuilt from their files), and so are the memories."""
    store.apply(
        [Put(Memory("deploys", "project_fact", "Deploys go out on Tuesdays", "Never on a Friday."))]
    )
    extract_memories(store, TALK, FakeModel([{"memories": []}]))
    episodes = Episodes(store.internal, store.config)
    topics = CountingTopics()
    assert episodes.search("database migration", 1, embedder=topics)  # type: ignore[arg-type]
    episodes.close()
    store.close()
    for end in ("", "-wal", "-shm"):
        Path(f"{store.internal / 'index.sqlite'}{end}").unlink(missing_ok=True)
    (store.internal / "index.sqlite").write_bytes(b"not a database " * 100)
    (said,) = episodes.search("database migration", 1, embedder=topics)  # type: ignore[arg-type]
    assert "we go with Alembic" in said.turn.text
    episodes.close()
    again = MemoryStore(store.root, store.config)
    assert [h.entry.name for h in again.search("friday deploys")] == ["deploys"]
    (said,) = Episodes(store.internal, store.config).search("alembic migration", 1)
    assert "we go with Alembic" in said.turn.text


def test_deleting_the_episodes_folder_takes_its_caches_along(store: MemoryStore) -> None:
    """What was said, deleted by a person, is not left behind in the search index or as
    vectors: the next search removes both."""
    extract_memories(store, TALK, FakeModel([{"memories": []}]))
    episodes = Episodes(store.internal, store.config)
    assert episodes.search("database migration", 1, embedder=CountingTopics())  # type: ignore[arg-type]
    episodes.close()
    shutil.rmtree(store.internal / "episodes")
    ask = [{"role": "user", "content": "what about the database migration?"}]
    reader = sqlite3.connect(store.internal / "index.sqlite")  # another process's, open
    reader.execute("SELECT count(*) FROM meta").fetchone()
    assert select(store, ask).episodes == []
    index = b"".join(
        Path(f"{store.internal / 'index.sqlite'}{end}").read_bytes()
        for end in ("", "-wal")
        if Path(f"{store.internal / 'index.sqlite'}{end}").exists()
    )
    # not even in the pages left free, nor in SQLite's log (another connection is open)
    (stem,) = tokenize("Alembic")  # as the full-text index keeps it
    assert index and stem.encode() not in index.lower()
    reader.close()
    with sqlite3.connect(store.internal / "index.sqlite") as db:
        assert db.execute("SELECT count(*) FROM episode_docs").fetchone()[0] == 0


def test_a_turn_that_fails_or_is_interrupted_keeps_what_the_user_said(tmp_path: Path) -> None:
    """The model times out, or the person presses Ctrl-C: the user's statement is still kept
    as an episode (recalled next) and handed to extraction."""
    root = tmp_path / ".memory"
    store = MemoryStore(root, Config(dir=root, embedder="none"))
    learned: list[Any] = []

    def extract(call: Any) -> object:
        learned.append(call)
        return {"memories": []}

    worker = MemoryWorker(lambda kind, text: None)
    failing = [{"role": "user", "content": "We moved staging to PostgreSQL 17 last night."}]
    with pytest.raises(LLMError):
        agent_loop(
            failing,
            store=store,
            model=FakeModel([LLMError("the model timed out")]),
            memory_model=FakeModel(default=extract),
            tools=Tools(tmp_path, store),
            worker=worker,
        )

    def interrupt(call: Any) -> object:
        raise KeyboardInterrupt

    stopped = [{"role": "user", "content": "Always answer me in British English."}]
    turn = agent_loop(
        stopped,
        store=store,
        model=FakeModel(default=interrupt),
        memory_model=FakeModel(default=extract),
        tools=Tools(tmp_path, store),
        worker=worker,
    )
    assert turn.interrupted
    assert worker.drain(10)
    texts = [t.text for t in Episodes(store.internal, store.config).turns()]
    assert any("PostgreSQL 17" in t for t in texts) and any("British English" in t for t in texts)
    assert len(learned) == 2  # both handed to the memory model


def test_the_turns_around_an_episode_hit_come_with_it_as_configured(tmp_path: Path) -> None:
    """``recall_episode_before`` and ``recall_episode_after`` bring the turns said before and
    after a hit with it, as one span (what it answers, and the answer), never repeating a
    turn another span holds."""
    from memdir.learn.conversation import keep_episodes
    from memdir.recall import episodes_for

    root = tmp_path / ".memory"
    talk = [
        {"role": "user", "content": "What should we call the new service?"},
        {"role": "user", "content": "Let's name it Heron."},
        {"role": "user", "content": "Heron it is, then: it ships in March."},
        {"role": "user", "content": "And the docs go on the wiki."},
        {"role": "user", "content": "Unrelated: lunch is at noon."},
    ]
    store = MemoryStore(root, Config(dir=root, embedder="none"))
    keep_episodes(store, talk, "2026-11-24T10:00:00Z")
    question = "when does heron ship"

    def spans(**settings: int) -> list[list[str]]:
        config = Config(dir=root, embedder="none", recall_episodes=1, **settings)
        found = episodes_for(MemoryStore(root, config), question)
        return [[line for line in s.turn.text.splitlines() if line] for s in found]

    (alone,) = spans(recall_episode_after=0)
    assert len(alone) == 1 and "ships in March" in alone[0]
    (around,) = spans(recall_episode_before=1, recall_episode_after=1)
    assert [("Let's name it Heron" in t, "March" in t, "wiki" in t) for t in around] == [
        (True, False, False),
        (False, True, False),
        (False, False, True),
    ]


def test_a_part_of_the_index_emptied_forgets_its_matrix_too(tmp_path: Path) -> None:
    """A vectors part that is reset holds nothing, in the file and in the matrix a search
    multiplies; what is synced after it is found again."""
    import numpy as np

    from memdir.find.vectors import Text, VectorIndex

    vectors = VectorIndex(tmp_path / "index.sqlite", TopicEmbedder(), prefix="episode_")  # type: ignore[arg-type]
    texts = {"a": "tabs indent", "b": "deploy to prod"}
    vectors.sync({k: k for k in texts}, lambda keys: [Text(k, k, texts[k]) for k in keys])
    question = np.asarray(TopicEmbedder().embed(["whitespace"]))[0]
    assert len(vectors.cosines(question).keys) == 2
    vectors.reset()
    assert len(vectors) == 0 and len(vectors.cosines(question).keys) == 0
    vectors.sync({"b": "b"}, lambda keys: [Text(k, k, texts[k]) for k in keys])
    assert list(vectors.cosines(question).keys) == ["b"]
    with sqlite3.connect(tmp_path / "index.sqlite") as db:
        assert db.execute("SELECT count(*) FROM episode_vec_docs").fetchone()[0] == 1
    vectors.close()


def _chat(user: str, reply_: str = "Okay.") -> list[Any]:
    return [{"role": "user", "content": user}, {"role": "assistant", "content": reply_}]


def test_a_later_chat_that_amends_a_decision_replaces_it_without_a_model(
    tmp_path: Path,
) -> None:
    """ "We settled on Redis for the session cache" then, later, "actually, from now on the
    session cache uses Memcached instead": the earlier turn is kept but never recalled, the
    later says when what it replaces was said, and a chat that only shares a word or two (or
    amends something else) replaces nothing."""
    from memdir.learn.conversation import keep_episodes
    from memdir.recall.block import render_block

    store = MemoryStore(tmp_path / ".memory", Config(dir=tmp_path / ".memory", embedder="none"))
    decided = "We settled on Redis for the session cache in the auth service, 30 minute TTL."
    keep_episodes(store, _chat(decided), said_at="2026-03-02")
    keep_episodes(store, _chat("The auth service docs need a new diagram."), said_at="2026-03-03")
    unrelated = "From now on standups start at 9:30 instead of 9."
    keep_episodes(store, _chat(unrelated), said_at="2026-03-04")
    amended = (
        "Actually, from now on the auth service session cache uses Memcached instead of"
        " Redis, with a 15 minute TTL."
    )
    keep_episodes(store, _chat(amended), said_at="2026-04-20")
    episodes = Episodes(store.internal, store.config)
    by_text = {t.text.splitlines()[0]: t for t in episodes.turns()}
    old = next(t for k, t in by_text.items() if "settled on Redis" in k)
    new = next(t for k, t in by_text.items() if "Memcached" in k)
    assert old.held.startswith("replaced by") and new.replaces == "2026-03-02"
    assert not any(t.held for k, t in by_text.items() if "diagram" in k or "standups" in k)
    found = episodes.search("which cache does the auth service session use?", 3)
    assert [s.turn.ref for s in found][:1] == [new.ref]
    assert all(s.turn.ref != old.ref for s in found)
    block = render_block(store, [], 2000, found)
    assert 'replaces="what was decided on 2 March 2026"' in block
    episodes.close()
