"""Paths that every large store or unusual endpoint takes and that nothing else exercises: a
held lock, the catalogue past its limit, the OpenAI token-parameter switch, the tool-step cap,
pinned memories under extraction, the index an earlier version's caches give way to,
/consolidate, and the README's own Python example."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import filelock
import pytest

from memdir import MemoryStore, StoreLocked
from memdir.config import Config
from memdir.disk.layout import state_dir
from memdir.learn.extract import extract_memories
from memdir.providers import make_model
from memdir.recall import catalogue_for
from memdir_agent.loop import MAX_STEPS, agent_loop
from memdir_agent.repl import Session
from memdir_agent.tools import Tools
from memdir_testing import FakeModel, tool_reply

from fakeserver import FakeLLMServer, Scripted, error, reply


def test_a_held_lock_is_a_one_line_error(tmp_path: Path) -> None:
    """A writer waits lock_timeout seconds, then names the lock and the fix."""
    root = tmp_path / ".memory"
    store = MemoryStore(root, Config(dir=root, lock_timeout=0.2))
    with (
        filelock.FileLock(str(state_dir(root) / "lock")),
        pytest.raises(StoreLocked, match=r"held .*lock for over 0s — wait for it"),
    ):
        store.write("x", type="reference", description="d", body="b")
    store.write("x", type="reference", description="d", body="b")  # free again


def test_catalogue_past_its_limit_keeps_pinned_and_best_hits(tmp_path: Path) -> None:
    """Over the limit, the catalogue is pinned memories first, then the best search hits,
    then the newest, never more than the limit."""
    root = tmp_path / ".memory"
    store = MemoryStore(root)
    for i in range(30):
        store.write(f"note-{i}", type="project_fact", description=f"ordinary note {i}", body="x")
    store.write(
        "kafka-retention", type="project_fact", description="Kafka keeps 7 days", body="retention"
    )
    store.write(
        "house-rules",
        type="user_preference",
        description="Answer briefly",
        body="b",
        extra={"pinned": True},
    )
    out = catalogue_for(store, "how long does kafka keep messages", 5)
    assert len(out) == 5 and out[0].name == "house-rules" and out[1].name == "kafka-retention"


def test_openai_switches_token_parameter_once(llm_server: FakeLLMServer) -> None:
    """An endpoint that refuses max_tokens gets max_completion_tokens, and keeps getting it."""

    def handler(req: dict[str, Any]) -> Scripted:
        if "max_tokens" in req["body"]:
            return error(
                400,
                "Unsupported parameter: 'max_tokens' is not supported with this"
                " model. Use 'max_completion_tokens' instead.",
            )
        return reply("ok")

    llm_server.handler = handler
    model = make_model(
        Config(provider="openai", api_key="k", base_url=llm_server.url + "/v1", max_retries=0)
    )
    for _ in range(2):
        assert model.complete(system="s", messages=[{"role": "user", "content": "x"}]).text == "ok"
    sent = [
        ("max_tokens" in r["body"], "max_completion_tokens" in r["body"])
        for r in llm_server.requests
    ]
    assert sent == [(True, False), (False, True), (False, True)]


def test_tool_step_cap_ends_a_runaway_turn(tmp_path: Path) -> None:
    """A model that never stops calling tools is stopped after MAX_STEPS calls."""
    store = MemoryStore(tmp_path / ".memory")
    model = FakeModel(default=tool_reply(("bash", {"command": "true"})))
    messages: list[Any] = [{"role": "user", "content": "loop forever"}]
    turn = agent_loop(messages, store=store, model=model, tools=Tools(tmp_path, store))
    assert turn.text == f"(stopped after {MAX_STEPS} tool steps)"
    assert turn.tool_calls == MAX_STEPS


def test_extraction_leaves_pinned_memories_alone(store: MemoryStore) -> None:
    """An update of a pinned memory is dropped with a note; the file stays as it was."""
    store.write(
        "house-rules",
        type="user_preference",
        description="Answer briefly",
        body="Short answers.",
        extra={"pinned": True},
    )
    before = (store.root / "house-rules.md").read_text()
    item = {
        "action": "update",
        "name": "house-rules",
        "type": "user_preference",
        "description": "Answer at length",
        "body": "Long answers.",
    }
    result = extract_memories(
        store, [{"role": "user", "content": "be verbose"}], FakeModel([{"memories": [item]}])
    )
    assert result.changes == [] and any("pinned" in d for d in result.dropped)
    assert (store.root / "house-rules.md").read_text() == before


def _collector(out: list[str]) -> Any:
    """A writable stream class whose writes land in ``out``."""

    class Out:
        def write(self, s: str) -> None:
            out.append(s)

        def flush(self) -> None:
            pass

    return Out


def test_chat_consolidate_command(tmp_path: Path) -> None:
    """/consolidate in chat runs consolidation with the memory model and reports the result."""
    store = MemoryStore(tmp_path / ".memory")
    store.write("a", type="project_fact", description="A fact", body="a")
    store.write("b", type="project_fact", description="Same fact", body="b")
    out: list[str] = []
    Out = _collector(out)

    merge = {
        "merge": [
            {
                "from": ["a", "b"],
                "into": {
                    "name": "ab",
                    "type": "project_fact",
                    "description": "A fact",
                    "body": "a and b",
                },
            }
        ],
        "retire": [],
    }
    session = Session(store, FakeModel(), FakeModel([merge]), tmp_path, out=Out(), err=Out())
    assert session.command("/consolidate")
    session.close()
    assert "merged 1 groups, retired 0" in "".join(out)
    assert [e.name for e in store.entries()] == ["ab"]


def test_readme_python_example_runs(
    llm_server: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented Python API example (docs/python-api.md), as written, against the fake
    server."""
    page = Path(__file__).parents[1] / "docs" / "python-api.md"
    section = page.read_text(encoding="utf-8").split("# Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None
    imported = [
        name.strip()
        for line in code.group(1).splitlines()
        if line.startswith("from ")
        for name in line.split(" import ", 1)[1].split(",")
    ]
    assert len(imported) == len(set(imported)), imported  # each name imported once
    llm_server.handler = lambda req: reply('{"selected": [], "memories": []}')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", llm_server.url)
    namespace: dict[str, Any] = {}
    exec(compile(code.group(1), "README.md", "exec"), namespace)
    assert namespace["request"][-1]["content"] == "How do I run the tests?"
    assert "uses-postgres" in {e.name for e in namespace["store"].entries()}


def test_chat_clear_model_and_cost(tmp_path: Path) -> None:
    """/clear empties the conversation, /model names the models, /cost sums this session."""
    store = MemoryStore(tmp_path / ".memory")
    out: list[str] = []
    Out = _collector(out)

    session = Session(store, FakeModel(), None, tmp_path, out=Out(), err=Out())
    session.messages.append({"role": "user", "content": "hi"})
    session.command("/clear")
    assert session.messages == [] and "new conversation" in "".join(out)
    session.command("/model")
    assert "memory: none (recall by search)" in "".join(out)
    session.command("/cost")
    assert "no model calls yet" in "".join(out)
    (store.internal / "usage.jsonl").write_text(
        json.dumps(
            {
                "time": "2999-01-01T00:00:00Z",
                "purpose": "agent",
                "input_tokens": 10,
                "output_tokens": 3,
            }
        )
        + "\n"
    )
    session.command("/cost")
    assert "agent: 1 calls, 10 tokens in, 3 out" in "".join(out)
    session.close()


def test_spinner_turns_then_clears_its_line() -> None:
    """The thinking spinner draws frames until stopped, then erases itself."""
    import io
    import time

    from memdir_agent.terminal import Spinner

    err = io.StringIO()
    spinner = Spinner(err)
    spinner.start()
    deadline = time.monotonic() + 10
    while err.getvalue().count("thinking…") < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    spinner.stop()
    spinner.stop()  # twice is harmless
    out = err.getvalue()
    assert out.count("thinking…") >= 2 and out.endswith("\r\x1b[K")


def test_prompt_toolkit_reader_reads_lines_and_keeps_history(tmp_path: Path) -> None:
    """With memdir[chat], the chat reads lines through prompt_toolkit, with a history file."""
    pytest.importorskip("prompt_toolkit")
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from memdir_agent.terminal import prompt_toolkit_reader

    with create_pipe_input() as pipe:
        read = prompt_toolkit_reader(tmp_path / "history", input=pipe, output=DummyOutput())
        assert read is not None
        pipe.send_text("remember tabs\n")
        assert read("› ") == "remember tabs"
    assert "remember tabs" in (tmp_path / "history").read_text()
