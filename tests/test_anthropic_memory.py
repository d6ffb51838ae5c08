"""The Anthropic memory tool backed by a memdir store: the SDK's own tool runner against the
fake server, which asks for every command in turn (bad paths and a secret included)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic")
from anthropic import Anthropic
from anthropic.lib.tools import BetaAbstractMemoryTool

from memdir import MemoryStore
from memdir.integrations.anthropic_memory import MemdirMemoryTool
from memdir.undo import undo

from fakeserver import FakeLLMServer, reply

GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
STEPS: list[dict[str, Any]] = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/coffee.md",
     "file_text": "# User likes coffee\nThe user prefers a flat white in the morning.\n"},
    {"command": "create", "path": "/memories/coffee.md", "file_text": "again"},
    {"command": "view", "path": "/memories/coffee.md"},
    {"command": "str_replace", "path": "/memories/coffee.md", "old_str": "flat white",
     "new_str": "cortado"},
    {"command": "str_replace", "path": "/memories/coffee.md", "old_str": "tea", "new_str": "x"},
    {"command": "insert", "path": "/memories/coffee.md", "insert_line": 7,
     "insert_text": "No sugar."},
    {"command": "rename", "old_path": "/memories/coffee.md", "new_path": "/memories/drinks.md"},
    {"command": "create", "path": "/memories/../../etc/passwd.md", "file_text": "x"},
    {"command": "create", "path": "/memories/%2e%2e/escape.md", "file_text": "x"},
    {"command": "view", "path": "/etc/passwd"},
    {"command": "create", "path": "/memories/sub/dir.md", "file_text": "x"},
    {"command": "create", "path": "/memories/token.md", "file_text": f"CI token: {GHP}\n"},
    {"command": "create", "path": "/memories/stale.md", "file_text": "Old sprint notes\n"},
    {"command": "delete", "path": "/memories/stale.md"},
    {"command": "delete", "path": "/memories"},
    {"command": "view", "path": "/memories"},
]


def test_sdk_tool_runner_drives_every_command(llm_server: FakeLLMServer, tmp_path: Path
                                              ) -> None:
    """Each command works or fails with the contract's message; the store keeps history and
    undo; nothing is written outside it and no secret lands on disk."""
    store = MemoryStore(tmp_path / ".memory")
    tool = MemdirMemoryTool(store)
    assert isinstance(tool, BetaAbstractMemoryTool)
    for i, step in enumerate(STEPS):
        llm_server.queue(reply("", (f"toolu_{i}", "memory", step)))
    llm_server.queue(reply("All done."))
    client = Anthropic(api_key="test", base_url=llm_server.url, max_retries=0)
    runner = client.beta.messages.tool_runner(
        model="claude-test", max_tokens=512, tools=[tool],
        messages=[{"role": "user", "content": "Tidy my memory."}])
    final = runner.until_done()
    assert final.content[-1].text == "All done."
    results: list[dict[str, Any]] = []
    for req in llm_server.requests[1:]:
        last = req["body"]["messages"][-1]
        results += [b for b in last["content"] if b.get("type") == "tool_result"]
    assert len(results) == len(STEPS)

    def text(i: int) -> str:
        content = results[i]["content"]
        return content if isinstance(content, str) else json.dumps(content)

    def failed(i: int) -> bool:
        return bool(results[i].get("is_error"))

    assert text(0).startswith("Here're the files and directories") and not failed(0)
    assert text(1) == "File created successfully at: /memories/coffee.md"
    assert failed(2) and "already exists" in text(2)
    assert "Here's the content of /memories/coffee.md with line numbers:" in text(3)
    assert "name: coffee" in text(3) and "type: user_preference" in text(3)
    assert text(4).startswith("The memory file has been edited.") and "cortado" in text(4)
    assert failed(5) and "did not appear verbatim" in text(5)
    assert text(6) == "The file /memories/coffee.md has been edited."
    assert text(7) == "Successfully renamed /memories/coffee.md to /memories/drinks.md"
    for i in (8, 9, 10, 11):
        assert failed(i), text(i)
    assert failed(12) and "credential" in text(12) and GHP not in text(12)
    assert text(14) == "Successfully deleted /memories/stale.md"
    assert failed(15) and "Cannot delete the /memories directory itself" in text(15)
    assert "/memories/drinks.md" in text(16) and "coffee.md" not in text(16)

    drinks = store.get("drinks")
    assert drinks.type == "user_preference" and drinks.description == "User likes coffee"
    assert "cortado" in drinks.body and "No sugar." in drinks.body
    assert {e.name for e in store.entries()} == {"drinks"}
    assert [v.action for v in store.history("coffee")][-1] == "delete"
    assert store.history("stale")[-1].reason == "deleted with the memory tool"
    assert GHP not in "".join(p.read_text() for p in store.root.rglob("*.md"))
    assert not (tmp_path / "etc").exists() and not (tmp_path / "escape.md").exists()
    undo(store)  # the delete of stale
    assert "stale" in {e.name for e in store.entries()}
