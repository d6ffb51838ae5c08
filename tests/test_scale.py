"""Change detection without sweeps, readers that never wait, consolidation in proportion to the
change, and agents that never hold the user's exit for memory work."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import filelock
import pytest

from memdir import MemoryStore, jobs
from memdir import memory as memfmt
from memdir.config import Config
from memdir.disk.layout import state_dir
from memdir.learn.consolidate import changed_since_last_run, consolidate_memories, is_due
from memdir.memory import Memory
from memdir_agent.worker import MemoryWorker
from memdir_testing import FakeModel

from fakeserver import FakeLLMServer, Scripted, reply


def hand_write(root: Path, name: str, description: str, body: str = "b") -> Path:
    """A memory file written by a person or another tool, not through memdir."""
    m = Memory(
        name, "project_fact", description, body, "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"
    )
    path = root / f"{name}.md"
    path.write_text(memfmt.dumps(m), encoding="utf-8")
    return path


def _write_one(root: str, name: str) -> None:
    MemoryStore(root, watch=False).write(
        name, type="project_fact", description="from afar", body="written by another process"
    )


def test_writes_of_another_process_are_seen_by_the_next_read(tmp_path: Path) -> None:
    """A warm store object sees what another process wrote at its very next read."""
    root = tmp_path / ".memory"
    store = MemoryStore(root, watch=False)
    store.write("mine", type="project_fact", description="mine", body="x")
    assert [e.name for e in store.entries()] == ["mine"]
    proc = multiprocessing.get_context("spawn").Process(
        target=_write_one, args=(str(root), "theirs")
    )
    proc.start()
    proc.join(30)
    assert [e.name for e in store.entries()] == ["mine", "theirs"]
    assert store.search("afar")[0].memory.name == "theirs"
    assert "theirs" in store.index_path.read_text(encoding="utf-8")


def test_hand_creates_deletes_and_renames_are_seen_without_a_sweep(tmp_path: Path) -> None:
    """Files added, removed or renamed by hand change the folder's time: the next read lists
    them and MEMORY.md follows."""
    root = tmp_path / ".memory"
    store = MemoryStore(root, watch=False)
    store.write("keep", type="project_fact", description="kept", body="x")
    hand_write(root, "added", "added by hand")
    assert [e.name for e in store.entries()] == ["added", "keep"]
    os.rename(root / "added.md", root / "renamed-file.md")
    (root / "keep.md").unlink()
    assert [(e.name, e.file) for e in store.entries()] == [("added", "renamed-file.md")]
    index = store.index_path.read_text(encoding="utf-8")
    assert "(renamed-file.md)" in index and "keep" not in index


def test_in_place_edit_is_seen_by_a_long_running_process_within_a_second(tmp_path: Path) -> None:
    """With the watcher on, an edit that keeps the inode and the folder's time is seen within
    a second, and search finds the new words."""
    root = tmp_path / ".memory"
    store = MemoryStore(root, watch=True)
    store.write("note", type="project_fact", description="a note", body="old words")
    assert store.watching
    path = root / "note.md"
    text = path.read_text(encoding="utf-8").replace("old words", "zebra crossing")
    with open(path, "r+", encoding="utf-8") as fh:  # in place: same inode, no rename
        fh.write(text)
        fh.truncate()
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and not store.search("zebra"):
        time.sleep(0.05)
    assert store.search("zebra")[0].memory.name == "note"
    assert store.get("note").body == "zebra crossing"
    store.close()


def test_a_new_process_sees_in_place_edits(tmp_path: Path) -> None:
    """At process start everything is looked at, so an in-place edit with an unchanged size and
    an old time is still noticed (the identity includes the time in nanoseconds)."""
    root = tmp_path / ".memory"
    MemoryStore(root).write("n", type="project_fact", description="before", body="aaaa")
    path = root / "n.md"
    path.write_text(path.read_text(encoding="utf-8").replace("aaaa", "bbbb"), encoding="utf-8")
    fresh = MemoryStore(root, watch=False)
    assert fresh.get("n").body == "bbbb" and fresh.search("bbbb")[0].memory.name == "n"


@pytest.mark.slow
def test_readers_never_wait_for_the_writers_lock(tmp_path: Path) -> None:
    """While another process holds the lock, reads of every kind answer at once."""
    root = tmp_path / ".memory"
    cfg = Config(dir=root, lock_timeout=0.5)
    store = MemoryStore(root, cfg, watch=False)
    store.write("a", type="project_fact", description="alpha topic", body="x")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import filelock, sys, time\n"
                f"l = filelock.FileLock({str(state_dir(root) / 'lock')!r}); l.acquire()\n"
                "print('held', flush=True); time.sleep(20)\n"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        hand_write(root, "b", "beta topic")  # a hand change: MEMORY.md cannot be repaired now
        reader = MemoryStore(root, cfg, watch=False)
        # (a read that waited for the lock would fail after lock_timeout with StoreLocked)
        assert [e.name for e in reader.entries()] == ["a", "b"]
        assert reader.search("beta")[0].memory.name == "b" and reader.get("a").body == "x"
        assert len(store.entries()) == 2 and store.problems() == []
        with pytest.raises(filelock.Timeout):
            filelock.FileLock(str(state_dir(root) / "lock"), timeout=0).acquire()
    finally:
        holder.kill()
        holder.wait()
    store.write("c", type="project_fact", description="gamma", body="x")  # lock free again
    assert "- [b](b.md)" in store.index_path.read_text(encoding="utf-8")


def test_memory_md_is_repaired_when_a_later_process_opens(tmp_path: Path) -> None:
    """A MEMORY.md that lags behind the files (edited, or written by an older version) is
    rewritten by the next open that can take the lock."""
    root = tmp_path / ".memory"
    MemoryStore(root).write("x", type="project_fact", description="x marks", body="b")
    (root / "MEMORY.md").write_text("# stale\n", encoding="utf-8")
    MemoryStore(root, watch=False)
    assert "- [x](x.md) — x marks" in (root / "MEMORY.md").read_text(encoding="utf-8")


def many(root: Path, n: int) -> None:
    for i in range(n):
        topic = ("docker", "postgres", "react", "kafka", "nginx")[i % 5]
        hand_write(root, f"{topic}-note-{i}", f"{topic} setting {i} for the {topic} service")


def test_automatic_consolidation_looks_at_what_changed_with_its_neighbours(tmp_path: Path) -> None:
    """After one new memory in a large store, one call sees that memory and its closest
    neighbours, not the whole store."""
    root = tmp_path / ".memory"
    root.mkdir()
    many(root, 400)
    cfg = Config(dir=root, consolidate_threshold=50, consolidate_batch=20)
    store = MemoryStore(root, cfg, watch=False)
    consolidate_memories(
        store, FakeModel(default={"merge": [], "retire": []}), whole=True, dry_run=True
    )
    model = FakeModel(default={"merge": [], "retire": []})
    consolidate_memories(store, model, max_calls=100)  # the first run: everything is new
    assert not is_due(store) and changed_since_last_run(store) == []
    store.write(
        "kafka-retention",
        type="project_fact",
        description="kafka retention is seven days for the kafka service",
        body="7d",
    )
    for _ in range(cfg.consolidate_cooldown):
        from memdir.learn.consolidate import note_turn

        note_turn(store)
    assert is_due(store)
    model = FakeModel(default={"merge": [], "retire": []})
    plan = consolidate_memories(store, model)
    assert len(model.calls) == 1 == plan.batches
    prompt = model.calls[0]["messages"][0]["content"]
    assert "## kafka-retention" in prompt and prompt.count("## ") <= cfg.consolidate_batch
    assert "## docker-" not in prompt  # only neighbours travel with it


def test_consolidation_budget_leaves_the_rest_for_next_time(tmp_path: Path) -> None:
    """Seeds beyond the call budget are kept and looked at by the next run; --all has none."""
    root = tmp_path / ".memory"
    root.mkdir()
    many(root, 200)
    cfg = Config(dir=root, consolidate_batch=10, consolidate_max_calls=2)
    store = MemoryStore(root, cfg, watch=False)
    model = FakeModel(default={"merge": [], "retire": []})
    first = consolidate_memories(store, model)
    assert first.batches == 2 and first.left
    second = consolidate_memories(store, FakeModel(default={"merge": [], "retire": []}))
    assert second.batches == 2 and set(second.left) < set(first.left)
    whole = FakeModel(default={"merge": [], "retire": []})
    plan = consolidate_memories(store, whole, whole=True, dry_run=True)
    assert plan.batches == len(whole.calls) >= 200 // 10


def test_force_still_caps_retirements(tmp_path: Path) -> None:
    """Even with --force, one run retires at most MAX_RETIRE_PER_RUN memories."""
    from memdir.learn.consolidate import MAX_RETIRE_PER_RUN

    root = tmp_path / ".memory"
    root.mkdir()
    n = MAX_RETIRE_PER_RUN + 50
    for i in range(n):
        hand_write(root, f"old-{i}", f"old fact {i}")
    store = MemoryStore(root, Config(dir=root, consolidate_batch=n + 1), watch=False)
    everything = {
        "merge": [],
        "retire": [{"name": f"old-{i}", "reason": "stale"} for i in range(n)],
    }
    plan = consolidate_memories(store, FakeModel([everything]), force=True)
    assert len(plan.retires) == MAX_RETIRE_PER_RUN == n - len(store.entries())


def test_exiting_agent_hands_slow_memory_work_over(tmp_path: Path) -> None:
    """Closing waits only the given time; what is left is handed over (to the store's queue,
    where the user's worker runs it)."""
    handed: list[Any] = []
    release = threading.Event()
    events: list[tuple[str, str]] = []
    worker = MemoryWorker(lambda k, t: events.append((k, t)), handed.append)
    worker.submit(
        "slow extraction",
        lambda: (release.wait(10), None)[1],
        {"messages": [{"role": "user", "content": "remember tabs"}]},
    )
    worker.submit(
        "queued extraction",
        lambda: "done",
        {"messages": [{"role": "user", "content": "and pytest"}]},
    )
    left = worker.close(timeout=0.3)
    assert not release.is_set()  # close came back while the slow job still runs
    assert left == ["slow extraction", "queued extraction"]
    assert sorted(h["messages"][0]["content"] for h in handed) == ["and pytest", "remember tabs"]
    release.set()


@pytest.mark.slow
def test_a_one_shot_run_finishes_learning_in_the_background(
    llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    """`memdir run` with a slow memory model replies and exits in a few seconds; what it
    learned is saved by a background learner without another run; a run whose endpoint is
    down keeps the user's words (an episode, an extraction waiting), learned by the next run
    once the model answers."""
    tabs = {
        "action": "create",
        "name": "prefer-tabs",
        "type": "user_preference",
        "description": "User prefers tabs",
        "body": "Indent with tabs.",
    }
    ci = {
        "action": "create",
        "name": "ci-github-actions",
        "type": "project_fact",
        "description": "CI moved from Buildkite to GitHub Actions",
        "body": "CI runs on GitHub Actions (moved from Buildkite this sprint).",
    }

    def handler(req: dict[str, Any]) -> Scripted:
        system = json.dumps(req["body"].get("system", ""))
        if "You extract memories" in system:
            talk = json.dumps(req["body"])
            item = ci if "Buildkite" in talk else tabs
            return Scripted(text=json.dumps({"memories": [item]}), delay=6)  # past run's wait
        if "You select memories" in system or "select relevant" in system:
            return reply('{"selected": []}')
        return reply("Noted.")

    llm_server.handler = handler
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "test",
        "ANTHROPIC_BASE_URL": llm_server.url,
        "MEMDIR_MAX_RETRIES": "0",
        "MEMDIR_TIMEOUT": "60",
    }
    env.pop("MEMDIR_DIR", None)

    def run(words: str, **more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memdir", "run", words], cwd=tmp_path, env={**env, **more},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    r = run("I like tabs")
    assert r.returncode == 0 and "Noted." in r.stdout, r.stderr
    assert "finishing in the background: memory extraction" in r.stderr
    assert "Traceback" not in r.stderr
    state = state_dir(tmp_path / ".memory")
    user = tmp_path / "user-store"
    end = time.monotonic() + 60
    while not (user.is_dir() and "prefer-tabs" in {e.name for e in MemoryStore(user).entries()}):
        assert time.monotonic() < end, "the background learner never saved prefer-tabs"
        time.sleep(0.1)
    while jobs.queued(state, "handover", running=True):
        assert time.monotonic() < end, jobs.queued(state, running=True)
        time.sleep(0.1)

    said = "We switched CI from Buildkite to GitHub Actions this sprint, remember that."
    r = run(said, ANTHROPIC_BASE_URL="http://127.0.0.1:9")
    assert r.returncode == 1 and "not reachable" in r.stderr
    assert "what you said is kept" in r.stderr and r.stderr.count("\n") == 1
    assert len(jobs.queued(state, "handover", running=True)) == 1
    episodes = state_dir(tmp_path / ".memory") / "episodes"
    assert "Buildkite" in "".join(p.read_text() for p in episodes.glob("*.jsonl"))
    r = run("hello")
    assert r.returncode == 0 and "1 extraction(s) handed over earlier" in r.stderr, r.stderr
    end = time.monotonic() + 60
    while "ci-github-actions" not in {e.name for e in MemoryStore(tmp_path / ".memory").entries()}:
        assert time.monotonic() < end, "the kept words were never learned"
        time.sleep(0.1)
