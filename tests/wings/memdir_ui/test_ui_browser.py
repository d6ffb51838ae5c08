"""memdir ui end to end in a real browser: Playwright driving Debian's Chromium against
``memdir ui`` on a temporary store. With UI_SCREENSHOTS=<folder> it also saves the
screenshots the README shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memdir import MemoryStore
from memdir import review as queue
from memdir.memory import Memory
from memdir.plan import Put
from memdir.usage import UsageLog

from conftest import child_env

CHROMIUM = os.environ.get("UI_CHROMIUM", "/usr/bin/chromium")
pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    if not Path(CHROMIUM).exists():
        why = f"no Chromium at {CHROMIUM}: apt-get install chromium (bash .ci/deps)"
        if os.environ.get("CI") or os.geteuid() == 0:
            pytest.fail(why)  # .ci/deps installs it here: absent is a failure, never a skip
        pytest.skip(why)
    project = tmp_path / "app"
    (project / ".git").mkdir(parents=True)
    store = MemoryStore(project / ".memory")
    store.write(
        "tabs", type="user_preference", description="Indent with tabs",
        body="Use **tabs**, width 4.",
    )  # fmt: skip
    store.write("api-port", type="project_fact", description="The API port", body="8080")
    for i in range(30):  # written by hand over two months, as a store grows
        kind = ("project_fact", "feedback", "reference")[i % 3]
        day = f"2026-{10 + i // 16:02d}-{1 + (i * 2) % 30:02d}T09:00:00Z"
        (store.root / f"fact-{i:02d}.md").write_text(
            f"---\nname: fact-{i:02d}\ntype: {kind}\ndescription: Build fact {i}\n"
            f"created: {day}\nupdated: {day}\n---\nx\n"
        )
    from memdir.gate.decisions import accept

    store.refresh()
    for i in range(30):  # the person's own notes: accepted, as 'memdir accept --all' would
        accept(store.internal, f"fact-{i:02d}", store.get(f"fact-{i:02d}").digest or "")
    time.sleep(0.1)
    edited = store.root / "fact-03.md"  # then edited in an editor: memdir records it
    edited.write_text(edited.read_text().replace("\nx\n", "\nx, and y since the review\n"))
    usage = UsageLog(store.internal / "usage.jsonl")
    for purpose, tokens in (
        ("select", 900),
        ("extract", 2400),
        ("consolidate", 5200),
        ("extract:hook:claude-code", 912_345),  # a long purpose, the most tokens: the widest words
    ):
        usage.record(
            purpose=purpose, provider="openai", model="qwen2.5-coder-1.5b",
            input_tokens=tokens, output_tokens=tokens // 8, latency_ms=1800, ok=tokens < 10**5,
        )  # fmt: skip
    (store.root / "config.toml").write_text('review = "ask"\n')
    queue.land(
        MemoryStore(store.root),
        [
            Put(Memory("pytest", "project_fact", "Tests run with pytest", "pytest -q")),
            Put(Memory("deploy", "project_fact", "Deploy on Fridays", "make deploy")),
        ],
        source="extract",
        summary="extracted pytest, deploy",
    )
    env = dict(child_env(), MEMDIR_USER_DIR=str(tmp_path / "user"))
    event = {"prompt": "which port does the API listen on?", "cwd": str(project)}
    hook = subprocess.run(
        [sys.executable, "-m", "memdir", "hook", "prompt", "--host", "claude-code"],
        input=json.dumps({**event, "hook_event_name": "UserPromptSubmit", "session_id": "s1"}),
        text=True, capture_output=True, env=env, cwd=project,
    )  # fmt: skip
    assert "api-port" in hook.stdout  # a real recall, logged
    start = subprocess.run(
        [sys.executable, "-m", "memdir", "hook", "start", "--host", "claude-code"],
        input=json.dumps({"hook_event_name": "SessionStart", "source": "startup",
                          "session_id": "3f1c9a2e-77aa-4c1b", "cwd": str(project)}),
        text=True, capture_output=True, env=env, cwd=project,
    )  # fmt: skip
    assert start.returncode == 0, start.stderr  # a session start, logged beside the recalls
    proc = subprocess.Popen(
        [sys.executable, "-m", "memdir", "ui", "--no-open"],
        cwd=project, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    line = proc.stderr.readline()
    found = re.search(r"(http://127\.0\.0\.1:\d+/\?token=\S+)", line)
    assert found, line
    try:
        yield found.group(1), project
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_person_sees_corrects_and_reviews_memories(server: tuple[str, Path]) -> None:
    """A person in a real browser sees, corrects and reviews memories."""
    from playwright.sync_api import expect, sync_playwright

    link, project = server
    shots = os.environ.get("UI_SCREENSHOTS")
    root = project / ".memory"

    def shot(page: Any, name: str) -> None:
        if shots:
            Path(shots).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(shots) / f"{name}.png"), full_page=True)

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        for _ in range(100):  # the server starts listening just after it prints the link
            try:
                page.goto(link)
                break
            except Exception:
                time.sleep(0.1)
        expect(page).to_have_url(re.compile(r"/memories$"))  # the token left the address bar
        page.wait_for_load_state("load")  # the link's page moved on by itself: wait for it
        expect(page.get_by_role("link", name="tabs", exact=True)).to_be_visible()
        shot(page, "memories")

        page.press("body", "/")  # the keyboard reaches the search box
        page.keyboard.type("indentation tabs")
        page.keyboard.press("Enter")
        expect(page.locator("h1")).to_contain_text("Search")
        page.get_by_role("link", name="tabs", exact=True).click()
        expect(page.locator("article.body strong")).to_have_text("tabs")
        shot(page, "memory")

        page.fill("#body", "Use **tabs**, width 8.")
        page.click("#save")
        expect(page.get_by_role("status")).to_have_text("Saved.")
        assert "width 8" in (root / "tabs.md").read_text()
        store = MemoryStore(root)
        assert [v.version for v in store.history("tabs")] == [1]

        page.select_option("#a", "1")
        page.select_option("#b", "now")
        page.click("#compare")
        expect(page.locator("pre.diff .del")).to_contain_text(["-Use **tabs**, width 4."])
        expect(page.locator("pre.diff .add")).to_contain_text(["+Use **tabs**, width 8."])
        shot(page, "diff")
        page.locator("table.versions form button").first.click()
        expect(page.get_by_role("status")).to_contain_text("Restored version 1")
        assert "width 4" in (root / "tabs.md").read_text()

        page.get_by_role("link", name=re.compile("^Review")).click()
        expect(page.locator(".proposal .item")).to_have_count(2)
        # the rule the person edited by hand after accepting it waits again, shown with them
        expect(page.locator("#rules-waiting .item")).to_have_count(1)
        expect(page.locator("#rules-waiting")).to_contain_text("fact-03")
        shot(page, "review")
        page.locator(".item", has_text="pytest").locator("button.approve").click()
        expect(page.get_by_role("status")).to_contain_text("Approved 1 change")
        page.locator(".item", has_text="deploy").locator("button.reject").click()
        expect(page.locator(".proposal")).to_have_count(0)
        page.locator("#rules-waiting .item", has_text="fact-03").locator("button.approve").click()
        expect(page.get_by_role("status")).to_contain_text("Accepted as your own")
        page.get_by_role("link", name=re.compile("^Review")).click()
        expect(page.get_by_text("Nothing waits for review")).to_be_visible()
        store = MemoryStore(root)
        assert "pytest" in store and "deploy" not in store

        page.get_by_role("link", name="Recall log").click()
        expect(page.locator("td.question")).to_contain_text(["which port does the API listen on?"])
        expect(page.locator("table.recalls").get_by_role("link", name="api-port")).to_be_visible()
        expect(page.locator("table.recalls")).to_contain_text("start:claude-code")
        shot(page, "recalls")
        page.get_by_role("link", name="Activity").click()
        expect(page.locator("body")).to_contain_text("changed outside memdir: fact-03")
        expect(page.locator("polyline").first).to_be_attached()
        bars = page.locator('svg[aria-label="model tokens by purpose"]')
        expect(bars.locator("text").first).to_have_text("extract:hook:claude-code")
        outside = bars.evaluate(
            """svg => { const box = svg.viewBox.baseVal;
                return [...svg.querySelectorAll('text, rect')].filter(t => {
                    const b = t.getBBox();
                    return b.x < box.x || b.x + b.width > box.x + box.width;
                }).map(t => t.textContent || 'a bar'); }"""
        )
        assert outside == []  # no purpose and no bar's words cut off at the picture's edge
        labels = bars.locator("text")
        first_label, first_bar = (
            labels.nth(0).bounding_box(),
            bars.locator("rect").first.bounding_box(),
        )
        assert (
            first_label and first_bar and first_label["x"] + first_label["width"] < first_bar["x"]
        )
        shot(page, "activity")

        page.set_viewport_size({"width": 420, "height": 800})  # a narrow window
        page.goto(link.split("/?")[0] + "/memories")
        expect(page.get_by_role("link", name="tabs", exact=True)).to_be_visible()
        shot(page, "narrow")
        browser.close()
