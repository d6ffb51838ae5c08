"""Host hooks as the hosts run them: `memdir hook …` subprocesses fed documented payloads and
session files in both hosts' formats; `memdir hooks install/uninstall`; the host CLI as the
memory model (fake `claude` and `codex` scripts on PATH)."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from memdir import MemoryStore
from memdir.cli.upkeep import NICE as LEARN_NICE
from memdir.disk.layout import state_dir
from memdir.integrations.transcripts import read_session

from conftest import CliFn, child_env, trust
from fakeserver import FakeLLMServer, reply

DATA = Path(__file__).parent / "data"
# a preference, but about this repository: the model's scope keeps it in the project's store
PNPM = {
    "memories": [
        {
            "action": "create",
            "name": "use-pnpm",
            "type": "user_preference",
            "scope": "project",
            "description": "Use pnpm, never npm, in this repo",
            "body": "The user asked to always use pnpm instead of npm.",
        }
    ]
}
PG = {
    "memories": [
        {
            "action": "create",
            "name": "staging-postgres",
            "type": "project_fact",
            "description": "Staging database is Postgres 16 on db-staging.internal",
            "body": "Staging runs Postgres 16 at db-staging.internal.",
        }
    ]
}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = child_env()
    env["HOME"] = str(tmp_path / "home")
    env.update(extra)
    return env


def hook(
    args: list[str], payload: Any, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    raw = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        [sys.executable, "-m", "memdir", "hook", *args],
        input=raw,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
    )


def fake_host(bindir: Path, name: str, answer: dict[str, Any]) -> None:
    """A `claude` or `codex` that answers every prompt with ``answer`` as the hosts print."""
    bindir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(answer)
    if name == "claude":
        out = json.dumps(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "result": text,
                "usage": {"input_tokens": 50, "output_tokens": 20},
            }
        )
    else:
        out = "\n".join(
            json.dumps(e)
            for e in [
                {"type": "thread.started", "thread_id": "t1"},
                {
                    "type": "item.completed",
                    "item": {"id": "i1", "type": "agent_message", "text": text},
                },
                {"type": "turn.completed", "usage": {"input_tokens": 50, "output_tokens": 20}},
            ]
        )
    script = bindir / name
    script.write_text(  # (it also says at which priority it was run)
        f'#!/bin/sh\nnice > "{bindir}/{name}.nice"\ncat > "{bindir}/{name}.stdin"\n'
        f"cat <<'EOF'\n{out}\nEOF\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_prompt_hook_adds_memories_for_both_hosts(tmp_path: Path) -> None:
    """Claude Code's and Codex's UserPromptSubmit payloads get the block as additionalContext;
    the session file's last turns count too."""
    project = tmp_path / "app"
    MemoryStore(project / ".memory").write(
        "use-pnpm",
        type="user_preference",
        description="Use pnpm, never npm, in this repo",
        body="Always pnpm.",
    )
    env = _env(tmp_path)
    claude = {
        "session_id": "7f0c",
        "transcript_path": str(DATA / "claude_session.jsonl"),
        "cwd": str(project),
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "add the lodash package",
    }
    r = hook(["prompt", "--host", "claude-code"], claude, tmp_path, env)
    assert r.returncode == 0 and r.stderr == ""
    out = json.loads(r.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "UserPromptSubmit"
    assert (
        "<relevant_memories>" in out["additionalContext"]
        and "Always pnpm." in out["additionalContext"]
    )  # found through the earlier turn about pnpm
    codex = {
        "session_id": "0199",
        "turn_id": "t1",
        "transcript_path": None,
        "cwd": str(project / "src"),
        "hook_event_name": "UserPromptSubmit",
        "model": "gpt-5.5",
        "permission_mode": "default",
        "prompt": "npm or pnpm?",
    }
    (project / "src").mkdir()
    r = hook(["prompt", "--host", "codex"], codex, tmp_path, env)
    assert r.returncode == 0 and "Always pnpm." in r.stdout
    r = hook(["prompt"], {**codex, "prompt": "what is the weather on mars"}, tmp_path, env)
    assert r.returncode == 0 and r.stdout == ""


@pytest.mark.parametrize(
    "payload, message",
    [
        ("not json", "the hook input is not JSON"),
        ("[1, 2]", "not a JSON object"),
        ({"hook_event_name": "UserPromptSubmit"}, "no 'prompt' text"),
    ],
)
def test_bad_payloads_never_break_the_host(tmp_path: Path, payload: Any, message: str) -> None:
    """Malformed or unknown input: exit 0, nothing on stdout, one line on stderr."""
    r = hook(["prompt"], payload, tmp_path, _env(tmp_path))
    assert r.returncode == 0 and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and message in r.stderr


def test_missing_store_and_locked_store_never_break_the_host(tmp_path: Path) -> None:
    """No store: exit 0 with one line saying so; a held lock does not hold up recall."""
    event = {"prompt": "hi", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit"}
    r = hook(["prompt"], event, tmp_path, _env(tmp_path))
    assert r.returncode == 0 and "no memory store" in r.stderr and r.stdout == ""
    store = MemoryStore(tmp_path / ".memory")
    store.write("hi-note", type="reference", description="Say hi back", body="hi")
    import filelock

    # a recall that waited for the lock would outlive hook()'s 60 s: the lock is kept 600 s
    (tmp_path / ".memory" / "config.toml").write_text("lock_timeout = 600\n")
    with filelock.FileLock(str(state_dir(tmp_path / ".memory") / "lock")):
        r = hook(["prompt"], event, tmp_path, _env(tmp_path))
        assert r.returncode == 0 and "Say hi back" not in r.stderr and "hi" in r.stdout


def _wait_for(fn: Any, seconds: float = 30) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.2)
    return fn()


@pytest.mark.slow
@pytest.mark.parametrize(
    "host, binary, session, answer, name",
    [
        ("claude-code", "claude", "claude_session.jsonl", PNPM, "use-pnpm"),
        ("codex", "codex", "codex_session.jsonl", PG, "staging-postgres"),
    ],
)
def test_learn_hook_extracts_in_the_background_with_the_host_cli(
    tmp_path: Path, host: str, binary: str, session: str, answer: dict[str, Any], name: str
) -> None:
    """The Stop hook returns at once; a detached worker reads the session file, asks the host's
    own CLI (no API key set) and saves the memory; a second run finds nothing new."""
    project = tmp_path / "app"
    MemoryStore(project / ".memory")
    bindir = tmp_path / "bin"
    fake_host(bindir, binary, answer)
    env = _env(tmp_path, PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    event = {
        "session_id": "s1",
        "transcript_path": str(DATA / session),
        "cwd": str(project),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    r = hook(["learn", "--host", host], event, tmp_path, env)
    assert r.returncode == 0 and r.stderr == ""  # the worker runs detached
    store = MemoryStore(project / ".memory")
    assert _wait_for(lambda: name in {e.name for e in store.entries()})
    sent = (bindir / f"{binary}.stdin").read_text()
    assert "<environment_context>" not in sent and "/clear" not in sent
    # the worker learns below the user's own priority
    started = os.getpriority(os.PRIO_PROCESS, 0)
    assert int((bindir / f"{binary}.nice").read_text()) == max(started, LEARN_NICE)
    learned = [op for op in store.log() if op.changes]
    assert learned[-1].source == f"extract:hook:{host}"  # the activity page says who learned it
    log = state_dir(project / ".memory") / "hooks.jsonl"
    assert _wait_for(lambda: log.exists() and '"status": "ok"' in log.read_text())
    r = hook(["learn", "--host", host], event, tmp_path, env)
    assert _wait_for(lambda: log.read_text().count('"status": "ok"') == 2)
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["new_messages"] == 0 and last["saved"] == []
    assert last["worker"] == "worker"  # the store's detached worker (no resident here)
    r = subprocess.run(
        [sys.executable, "-m", "memdir", "doctor"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert f"last learn hook: {last['time']} ({host}) ok" in r.stdout


@pytest.mark.slow
def test_doctor_says_what_the_last_learn_saved_and_consolidated(tmp_path: Path) -> None:
    """The learn hook's line in doctor names what it saved and what consolidation did, and
    where each merge's and retirement's reason is."""
    project = tmp_path / "app"
    store = MemoryStore(project / ".memory")
    record = {
        "time": "2026-12-02T10:00:00Z", "hook": "learn", "host": "claude-code", "status": "ok",
        "saved": ["use-pnpm"],
        "consolidated": [{"store": str(store.root), "merged": 2, "retired": 1}],
    }  # fmt: skip
    (store.internal / "hooks.jsonl").write_text(json.dumps(record) + "\n")
    r = subprocess.run(
        [sys.executable, "-m", "memdir", "doctor"], cwd=project, env=_env(tmp_path),
        capture_output=True, text=True,
    )  # fmt: skip
    assert "saved use-pnpm; consolidated .memory: 2 merged, 1 retired" in r.stdout, r.stdout
    assert "memdir log" in r.stdout


@pytest.mark.slow
def test_learn_failure_is_logged_not_raised(tmp_path: Path) -> None:
    """A memory model that cannot be reached: the worker logs the failure; doctor shows it."""
    project = tmp_path / "app"
    MemoryStore(project / ".memory")
    env = _env(tmp_path, PATH="/usr/bin:/bin", MEMDIR_PROVIDER="openai", OPENAI_API_KEY="k",
               OPENAI_BASE_URL="http://127.0.0.1:9/v1")  # fmt: skip
    event = {
        "transcript_path": str(DATA / "claude_session.jsonl"),
        "cwd": str(project),
        "hook_event_name": "SessionEnd",
    }
    r = hook(["learn", "--host", "claude-code"], event, tmp_path, env)
    assert r.returncode == 0
    log = state_dir(project / ".memory") / "hooks.jsonl"
    assert _wait_for(lambda: log.exists() and "error" in log.read_text(), 90)
    r = subprocess.run(
        [sys.executable, "-m", "memdir", "doctor"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert "the last learn hook failed:" in r.stdout


def test_sessions_of_both_hosts_are_read(tmp_path: Path) -> None:
    """User and assistant turns, tool calls and results; injected context and meta lines are
    skipped; a torn last line is ignored."""
    claude = read_session(DATA / "claude_session.jsonl")
    assert [m["role"] for m in claude] == ["user", "assistant", "user", "assistant"]
    codex = read_session(DATA / "codex_session.jsonl")
    assert codex[0] == {
        "role": "user",
        "content": "Note for later: the staging database is Postgres 16 on db-staging.internal.",
    }
    assert codex[1]["content"][0]["type"] == "tool_use"
    assert codex[2]["content"][0]["type"] == "tool_result"
    torn = tmp_path / "torn.jsonl"
    torn.write_text((DATA / "claude_session.jsonl").read_text() + '{"type": "user", "mess')
    assert len(read_session(torn)) == 4


def test_doctor_shows_hooks_installed_for_everyone_where_no_project_store_is(
    tmp_path: Path,
) -> None:
    """The README's path: hooks installed for the user (every project), memories in the
    user's own store, no project store. 'memdir doctor' in a project checks the user's store
    and says which hooks are installed and how the last learn ended (here: why it learned
    nothing) — not only that nothing is wrong."""
    env = _env(tmp_path)
    project = tmp_path / "app"
    project.mkdir()

    def memdir(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memdir", *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
        )

    add = ("add", "prefer-pytest", "--type", "user_preference", "-d", "User runs pytest")
    assert "in the user store" in memdir(*add).stdout
    assert memdir("hooks", "install", "claude-code", "--scope", "user").returncode == 0
    settings = tmp_path / "home" / ".claude" / "settings.json"
    before = memdir("doctor")
    assert "No project store here; checking your own store." in before.stderr
    assert f"hooks installed: claude-code (user: {settings})" in before.stdout
    assert "last learn hook" not in before.stdout
    transcript = tmp_path / "session.jsonl"
    transcript.write_text("")
    event = {"hook_event_name": "Stop", "transcript_path": str(transcript), "cwd": str(project)}
    learn = hook(["learn", "--host", "claude-code"], event, project, env)
    assert learn.returncode == 0
    from memdir import jobs

    queue = state_dir(Path(env["MEMDIR_USER_DIR"]))  # the learn is the store's worker's job
    for _ in range(600):
        if not jobs.queued(queue, running=True):
            break
        time.sleep(0.1)
    after = memdir("doctor")
    # no model here (no key, no host CLI): the person is told why nothing is learned
    assert "last learn hook" in after.stdout and "(claude-code) ok; no memory model" in (
        after.stdout
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "host, rel", [("claude-code", ".claude/settings.local.json"), ("codex", ".codex/hooks.json")]
)
def test_install_merges_idempotently_and_uninstall_removes_only_ours(
    tmp_path: Path, host: str, rel: str
) -> None:
    """The user's own hooks and settings stay; a second install changes nothing; uninstall
    takes out exactly what install added; a broken settings file is left alone."""
    project = tmp_path / "app"
    settings = project / rel
    settings.parent.mkdir(parents=True)
    mine = {
        "model": "x",
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]},
    }
    settings.write_text(json.dumps(mine))
    env = _env(tmp_path)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memdir", "hooks", *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
        )

    r = run("install", host)
    assert r.returncode == 0 and "+" in r.stdout and "Installed memdir's hooks" in r.stdout
    data = json.loads(settings.read_text())
    assert data["model"] == "x"
    stop = [h["command"] for g in data["hooks"]["Stop"] for h in g["hooks"]]
    assert "notify-send done" in stop and any("memdir hook learn" in c for c in stop)
    prompt_cmd = data["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    if host == "codex":  # a file teammates share: their own memdir, from the PATH
        assert prompt_cmd == "memdir hook prompt --host codex"
    else:  # this machine's own settings: this installation, wherever the PATH points
        assert prompt_cmd == f"{sys.executable} -m memdir hook prompt --host {host}"
        assert not (project / ".claude" / "settings.json").exists()
    assert "nothing changed" in run("install", host).stdout
    r = subprocess.run(
        [sys.executable, "-m", "memdir", "init"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    r = subprocess.run(
        [sys.executable, "-m", "memdir", "doctor"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert f"hooks installed: {host} (project: {settings})" in r.stdout
    run("uninstall", host)
    assert json.loads(settings.read_text()) == mine
    settings.write_text("{broken")
    r = run("install", host)
    assert r.returncode == 1 and "is not valid JSON" in r.stderr
    assert settings.read_text() == "{broken"
    # a settings file memdir made for its hooks alone goes away with them: no '{}' stub
    settings.unlink()
    settings.parent.rmdir()
    assert run("install", host).returncode == 0 and settings.is_file()
    r = run("uninstall", host)
    assert r.returncode == 0 and not settings.exists() and not settings.parent.exists()


@pytest.mark.slow
def test_stores_start_where_they_belong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """add in a subfolder of a repository without a store creates it at the repository's top;
    the learn hook outside any store learns into the user's store and creates none; an MCP
    server started in an arbitrary folder remembers into the user's store."""
    import asyncio

    from mcp.client import Client

    from memdir.config import load_config
    from memdir.integrations.mcp import build_server

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "pkg" / "sub").mkdir(parents=True)
    env = _env(tmp_path)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "memdir",
            "add",
            "db",
            "--type",
            "project_fact",
            "-d",
            "Postgres 16",
            "--body",
            "pg",
        ],
        cwd=repo / "pkg" / "sub",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert (repo / ".memory" / "db.md").is_file()
    assert not (repo / "pkg" / "sub" / ".memory").exists()

    other = tmp_path / "other-repo"
    (other / ".git").mkdir(parents=True)
    event = {
        "session_id": "s1",
        "transcript_path": str(DATA / "claude_session.jsonl"),
        "cwd": str(other),
        "hook_event_name": "Stop",
    }
    r = hook(["learn", "--host", "claude-code"], event, tmp_path, env)
    assert r.returncode == 0, r.stderr
    user_root = Path(env["MEMDIR_USER_DIR"])
    assert _wait_for(lambda: (state_dir(user_root) / "hooks.jsonl").exists())
    assert not (other / ".memory").exists()

    anywhere = tmp_path / "desktop"
    anywhere.mkdir()
    monkeypatch.chdir(anywhere)
    config = load_config()

    async def body() -> str:
        async with Client(build_server(config)) as client:
            r = await client.call_tool(
                "remember", {"description": "Notes in Obsidian", "body": "The vault is ~/notes."}
            )
            return str(r.content[0].text)

    said = asyncio.run(body())
    assert "in the user's own store" in said and not (anywhere / ".memory").exists()


def test_the_prompt_hook_never_waits_on_the_model(tmp_path: Path) -> None:
    """A model that does not answer: the hook answers from search within its budget (the
    process would otherwise outlive the 60 s this test gives it); an unknown --host is no
    host, never exit 2; a huge prompt is read from its end; a pipe as the transcript is not
    opened."""
    from fakeserver import FakeLLMServer, Scripted

    project = tmp_path / "app"
    store = MemoryStore(project / ".memory")
    store.write(
        "deploy-days",
        type="project_fact",
        description="Deploys happen on Fridays",
        body="We deploy on Fridays after lunch.",
    )
    (project / ".memory" / "config.toml").write_text("hook_budget = 1.0\n")
    server = FakeLLMServer().start()
    server.handler = lambda req: Scripted(text='{"selected": []}', delay=90)
    fifo = tmp_path / "session.fifo"
    os.mkfifo(fifo)
    try:
        env = _env(
            tmp_path,
            ANTHROPIC_API_KEY="test",
            ANTHROPIC_BASE_URL=server.url,
            MEMDIR_MAX_RETRIES="0",
        )
        event = {
            "prompt": "x " * 400_000 + "when do we deploy?",
            "cwd": str(project),
            "hook_event_name": "UserPromptSubmit",
            "transcript_path": str(fifo),
        }
        r = hook(["prompt", "--host", "vim"], event, tmp_path, env)
        assert r.returncode == 0, r.stderr
        assert (
            "We deploy on Fridays"
            in json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
        )
        # (the model, asked or still loading its SDK, was not waited for: 90 s > 60 s)
        from memdir.recalllog import entries

        (logged,) = entries(store.internal)
        assert logged["path"] == "search-fallback"
        assert "did not answer in the" in logged["note"] and "of the hook's 1 s" in logged["note"]
    finally:
        server.stop()


def test_learn_workers_refuse_pipes_and_devices(tmp_path: Path) -> None:
    """A transcript that is a FIFO or /dev/zero ends the worker with an error, not a hang."""
    from memdir.config import load_config
    from memdir.integrations.workerjobs import learn_job

    project = tmp_path / "app"
    MemoryStore(project / ".memory")
    config = load_config({"dir": project / ".memory"})
    fifo = tmp_path / "t.fifo"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        data = {"event": {"transcript_path": str(path), "hook_event_name": "Stop"}, "host": None}
        record = learn_job(data, config)
        assert record["status"] == "error" and "not a regular file" in record["error"]


@pytest.mark.slow
def test_concurrent_learns_ask_the_model_once(tmp_path: Path) -> None:
    """Ten Stop hooks for the same new messages: one extraction call."""
    from fakeserver import FakeLLMServer, reply

    project = tmp_path / "app"
    MemoryStore(project / ".memory")
    server = FakeLLMServer().start()
    server.handler = lambda req: reply(json.dumps(PG))
    try:
        env = _env(
            tmp_path,
            ANTHROPIC_API_KEY="test",
            ANTHROPIC_BASE_URL=server.url,
            MEMDIR_MAX_RETRIES="0",
            MEMDIR_USER_DIR="none",
        )
        event = {
            "session_id": "s1",
            "transcript_path": str(DATA / "codex_session.jsonl"),
            "cwd": str(project),
            "hook_event_name": "Stop",
        }
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "memdir", "hook", "learn", "--host", "codex"],
                stdin=subprocess.PIPE,
                env=env,
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(10)
        ]
        for p in procs:
            p.communicate(json.dumps(event).encode(), timeout=60)
        log = state_dir(project / ".memory") / "hooks.jsonl"
        assert _wait_for(
            lambda: log.exists() and log.read_text().count('"hook": "learn"') == 10, 120
        )
        assert len(server.requests) == 1
    finally:
        server.stop()


CLAUDE_LIKE = r'''#!{python}
"""A `claude -p` that behaves as Claude Code does for hooks: it keeps a transcript of its own
session and runs the Stop hooks of the user's and the folder's settings with that transcript,
in its environment (less the nested-session marker when FAKE_DROP_MARKER is set)."""
import json, os, pathlib, subprocess, sys
prompt = sys.stdin.read()
calls = pathlib.Path({calls!r})
calls.write_text(calls.read_text() + "call\n" if calls.exists() else "call\n")
n = len(calls.read_text().splitlines())
transcript = pathlib.Path({folder!r}) / f"nested-{{n}}.jsonl"
answer = json.dumps({{"memories": []}})
lines = [
    {{"type": "user", "message": {{"role": "user", "content": prompt}}, "uuid": "u1"}},
    {{"type": "assistant", "message": {{"role": "assistant",
      "content": [{{"type": "text", "text": answer}}]}}, "uuid": "a1"}},
]
transcript.write_text("".join(json.dumps(x) + "\n" for x in lines))
env = dict(os.environ)
if env.get("FAKE_DROP_MARKER"):
    env.pop("MEMDIR_NESTED", None)
for settings in (pathlib.Path.home() / ".claude/settings.json",
                 pathlib.Path.cwd() / ".claude/settings.local.json"):
    if settings.is_file():
        for group in json.loads(settings.read_text()).get("hooks", {{}}).get("Stop", []):
            for h in group["hooks"]:
                event = {{"hook_event_name": "Stop", "transcript_path": str(transcript),
                          "cwd": os.getcwd(), "session_id": f"nested-{{n}}"}}
                subprocess.run(h["command"], shell=True, input=json.dumps(event), text=True,
                               env=env, cwd=os.getcwd())
print(json.dumps({{"type": "result", "is_error": False, "result": answer,
                  "usage": {{"input_tokens": 5, "output_tokens": 5}}}}))
'''


@pytest.mark.slow
@pytest.mark.parametrize("drop_marker", [False, True])
def test_learning_through_the_hosts_cli_never_starts_itself_again(
    tmp_path: Path, drop_marker: bool
) -> None:
    """The learn worker's `claude -p` runs memdir's installed hooks as Claude Code does; the
    nested session learns nothing and starts no worker of its own, also when a host drops the
    nested-session marker from the environment: one model call, then quiet."""
    project = tmp_path / "app"
    MemoryStore(project / ".memory")
    bindir, folder = tmp_path / "bin", tmp_path / "nested"
    bindir.mkdir()
    folder.mkdir()
    calls = tmp_path / "calls.txt"
    script = bindir / "claude"
    script.write_text(
        CLAUDE_LIKE.format(python=sys.executable, calls=str(calls), folder=str(folder))
    )
    script.chmod(0o755)
    env = _env(tmp_path, PATH=f"{bindir}:/usr/bin:/bin")
    if drop_marker:
        env["FAKE_DROP_MARKER"] = "1"
    from memdir.integrations import hooks as host_hooks

    assert Path.home() == Path(env["HOME"])  # the settings the fake host reads
    host_hooks.install("claude-code", user=True, project=project)
    host_hooks.install("claude-code", user=False, project=project)
    event = {
        "transcript_path": str(DATA / "claude_session.jsonl"),
        "cwd": str(project),
        "hook_event_name": "Stop",
        "session_id": "top",
    }
    assert hook(["learn", "--host", "claude-code"], event, project, env).returncode == 0

    def records() -> list[dict[str, Any]]:  # the project's log, and the user store's
        logs = sorted(tmp_path.rglob("hooks.jsonl"))
        lines = [x for log in logs for x in log.read_text().splitlines()]
        return [json.loads(x) for x in lines if '"learn"' in x]

    want = 2 if drop_marker else 1  # the nested session's own worker, which asks no model
    assert _wait_for(lambda: len(records()) >= want, 60), records()
    assert calls.read_text().splitlines() == ["call"]
    assert [r["status"] for r in records()] == ["ok"] * want
    if drop_marker:
        assert "not learned from" in records()[-1]["note"] or any(
            "not learned from" in r.get("note", "") for r in records()
        )


@pytest.mark.slow
def test_the_prompt_hook_answers_a_fresh_unembedded_store_by_bm25_and_exits_0(
    tmp_path: Path,
) -> None:
    """Hundreds of hand-written memories never embedded: the hook embeds only the question,
    answers by BM25 where vectors are not ready, exits 0 (no abort from a native thread), and
    leaves the embedding to a background indexer."""
    project = tmp_path / "app"
    root = project / ".memory"
    root.mkdir(parents=True)
    for i in range(300):
        (root / f"service-{i}.md").write_text(
            f"---\nname: service-{i}\ntype: project_fact\ndescription: Service {i} runs on"
            f" port {9000 + i}\n---\nThe service number {i} listens on port {9000 + i}.\n"
        )
    (root / "billing-db.md").write_text(
        "---\nname: billing-db\ntype: project_fact\ndescription: Billing uses the ledger"
        " schema\n---\nThe billing service keeps invoices in the ledger schema of Postgres.\n"
    )
    event = {"prompt": "which schema holds the billing invoices?", "cwd": str(project),
             "hook_event_name": "UserPromptSubmit", "session_id": "s"}  # fmt: skip
    r = hook(["prompt", "--host", "claude-code"], event, project, _env(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "terminate called" not in r.stderr
    context = json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
    assert 'name="billing-db"' in context
    vectors = state_dir(root) / "index.sqlite"  # the background indexer's work
    assert _wait_for(lambda: len(_embedded(vectors)) == 301, 180), len(_embedded(vectors))


def _embedded(path: Path) -> list[Any]:
    import sqlite3

    try:
        with sqlite3.connect(path) as db:
            return db.execute("SELECT key FROM vec_docs").fetchall()
    except sqlite3.DatabaseError:
        return []


@pytest.mark.slow
def test_installing_for_codex_says_how_to_trust_the_hooks(tmp_path: Path) -> None:
    """Codex skips an untrusted hook without a word: install says to trust it in /hooks, and
    for a project's file that the project must be trusted too."""

    def install(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "memdir", "hooks", "install", "codex", *args],
            cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, check=True,
        )  # fmt: skip
        return proc.stdout

    out = install()
    assert "type /hooks and trust memdir's entries" in out
    assert f"[projects.'{tmp_path}'] trust_level = \"trusted\"" in out
    out = install("--scope", "user")
    assert "/hooks" in out and "trust_level" not in out


@pytest.mark.slow
def test_the_earlier_scope_flags_still_work_and_errors_name_the_right_help(
    tmp_path: Path,
) -> None:
    """--project and --user (before --scope) are still taken; a bad flag's hint names the
    command that exists."""

    def memdir(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memdir", *args],
            cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
        )  # fmt: skip

    assert "(project)" in memdir("hooks", "install", "claude-code", "--project").stdout
    assert (tmp_path / ".claude" / "settings.local.json").is_file()
    assert "(user)" in memdir("hooks", "install", "claude-code", "--user").stdout
    bad = memdir("hooks", "install", "claude-code", "--bogus")
    assert bad.returncode == 2
    assert bad.stderr.strip().endswith("— see 'memdir hooks install --help'")


def test_with_a_memory_model_the_hook_opens_its_stores_once_and_uses_the_models_pick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_server: Any
) -> None:
    """The memory model's choice and search's run on one set of stores, opened once per
    prompt (the two threads take turns reading them), and the model's pick is what goes in."""
    from memdir.integrations import hooks
    from memdir.integrations.lease import Lease
    from memdir.recalllog import entries

    from fakeserver import reply

    project = tmp_path / "app"
    store = MemoryStore(project / ".memory")
    for i in range(40):  # more than a thread's turn: both read while the other is at it
        store.write(f"note-{i}", type="project_fact", description=f"Note {i} on deploys", body="x")
    store.write(
        "deploy-days",
        type="project_fact",
        description="Deploys happen on Fridays",
        body="We deploy on Fridays after lunch.",
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", llm_server.url)
    monkeypatch.setenv("MEMDIR_MAX_RETRIES", "0")
    (project / ".memory" / "config.toml").write_text("hook_budget = 10.0\nhook_model_wait = 1.0\n")
    trust(project / ".memory" / "config.toml")
    llm_server.handler = lambda req: reply('{"selected": ["deploy-days"]}')

    class Counting:
        taken = 0

        def take(self, config: Any, budget: float) -> Lease:
            Counting.taken += 1
            return hooks.FRESH.take(config, budget)

    event = {"prompt": "when do we deploy?", "cwd": str(project), "session_id": "s1"}
    for _ in range(3):
        out = hooks.prompt(event, host="claude-code", stores=Counting())
        assert "We deploy on Fridays" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert Counting.taken == 3  # one set of stores per prompt, not one per thread
    logged = entries(store.internal)
    assert [e["path"] for e in logged] == ["llm"] * 3
    assert all([m["name"] for m in e["memories"]] == ["deploy-days"] for e in logged), logged


def test_with_nothing_stored_the_hook_makes_no_model_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_server: Any
) -> None:
    """A new user's empty store: the prompt hook answers without making a model client (its
    SDK is not loaded, nothing is asked) and without waiting its share for one."""
    from memdir.integrations import hooks

    from fakeserver import reply

    project = tmp_path / "app"
    MemoryStore(project / ".memory")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", llm_server.url)
    made: list[Any] = []
    from memdir.integrations import race

    real = race.memory_model
    monkeypatch.setattr(race, "memory_model", lambda *a: made.append(a) or real(*a))
    event = {"prompt": "when do we deploy?", "cwd": str(project), "session_id": "s1"}
    hooks.prompt(event, host="claude-code")
    assert made == [] and llm_server.requests == []
    MemoryStore(project / ".memory").write(
        "deploy-days", type="project_fact", description="Deploys happen on Fridays", body="x"
    )
    (project / ".memory" / "config.toml").write_text("hook_budget = 10.0\nhook_model_wait = 1.0\n")
    trust(project / ".memory" / "config.toml")
    llm_server.handler = lambda req: reply('{"selected": ["deploy-days"]}')
    out = hooks.prompt(event, host="claude-code")
    assert len(made) == 1 and len(llm_server.requests) == 1  # once something is stored, asked
    assert "deploy-days" in out


def test_a_memory_model_that_breaks_leaves_search_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model's side of the prompt's race failing in a way no model error covers: the
    hook answers with search's picks, and the recall log says why the model's were not used
    (nothing printed to the host, nothing lost silently)."""
    from memdir.integrations import hooks
    from memdir.recalllog import entries

    project = tmp_path / "app"
    store = MemoryStore(project / ".memory")
    store.write("deploy-days", type="project_fact", description="Deploys happen on Fridays",
                body="We deploy on Fridays.")  # fmt: skip
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")

    def broken(*args: Any) -> Any:
        raise RuntimeError("the client could not be made")

    from memdir.integrations import race

    monkeypatch.setattr(race, "memory_model", broken)
    event = {"prompt": "when do we deploy?", "cwd": str(project), "session_id": "s1"}
    out = hooks.prompt(event, host="claude-code")
    assert "We deploy on Fridays" in out
    (logged,) = entries(store.internal)
    assert logged["path"] == "search-fallback"
    assert "the memory model failed (the client could not be made)" in logged["note"]


def test_one_worker_per_store_takes_every_queued_job(tmp_path: Path) -> None:
    """Three sessions end at once and an index is asked for twice: a worker that finds the
    store's worker lock held leaves the jobs to that one; 'memdir work' runs every queued
    job, oldest first (one index job stands for both asks), and the queue is empty after."""
    import filelock

    from memdir import jobs

    root = tmp_path / ".memory"
    store = MemoryStore(root)
    for i in range(3):
        transcript = tmp_path / f"session-{i}.jsonl"
        transcript.write_text("")
        event = {"hook_event_name": "Stop", "transcript_path": str(transcript), "cwd": str(root)}
        jobs.enqueue(store.internal, "learn", {"event": event, "host": "claude-code"})
    jobs.enqueue(store.internal, "index")
    jobs.enqueue(store.internal, "index")
    assert len(jobs.queued(store.internal)) == 4
    lock = jobs.folder(store.internal) / jobs.WORKER_LOCK
    with filelock.FileLock(str(lock), timeout=0):
        assert jobs.at_work(store.internal)
        assert jobs.work(store.internal, {}) == 0  # another worker is at work
    assert len(jobs.queued(store.internal)) == 4
    assert _work(root).returncode == 0
    assert jobs.queued(store.internal, running=True) == []
    records = [json.loads(x) for x in (store.internal / "hooks.jsonl").read_text().splitlines()]
    assert [r["hook"] for r in records] == ["learn"] * 3
    assert jobs.failures(store.internal) == []


def test_a_job_that_fails_is_logged_once_and_shown_by_doctor(tmp_path: Path, cli: CliFn) -> None:
    """A job the worker cannot do (here a learn whose event is not one) is dropped with its
    reason in the store's failure log, and 'memdir doctor' shows it; the next job still runs."""
    from memdir import jobs

    store = MemoryStore(tmp_path / ".memory")
    jobs.enqueue(store.internal, "learn", {"host": None})  # no event
    jobs.enqueue(store.internal, "index")
    assert _work(store.root).returncode == 0
    assert jobs.queued(store.internal, running=True) == []
    failed = jobs.failures(store.internal)
    assert [f["kind"] for f in failed] == ["learn"] and "no hook event" in failed[0]["error"]
    r = cli("doctor")
    assert "a learn job failed" in r.out and "no hook event" in r.out


def _work(root: Path) -> subprocess.CompletedProcess[str]:
    """``memdir work`` for the store at ``root``, as jobs.enqueue starts it (BM25 alone)."""
    env = {**child_env(), "MEMDIR_EMBEDDER": "none"}
    return subprocess.run(
        [sys.executable, "-m", "memdir", "--dir", str(root), "work"],
        env=env,
        cwd=root.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_second_worker_leaves_before_it_opens_the_store(tmp_path: Path) -> None:
    """'memdir work' started while the store's worker is at work leaves at once, without
    opening the store (here one that is not even there: opening it would fail)."""
    import filelock

    from memdir import jobs

    root = tmp_path / "gone" / ".memory"
    root.parent.mkdir()
    state = state_dir(root)
    jobs.enqueue(state, "index")
    with filelock.FileLock(str(jobs.folder(state) / jobs.WORKER_LOCK), timeout=0):
        r = _work(root)
    assert r.returncode == 0 and r.stderr == "" and not root.exists()
    assert jobs.queued(state, "index") and not jobs.failures(state)  # left for the one at work
    # no worker at work: it takes the job, which opens the store, fails, and is logged
    assert _work(root).returncode == 0 and not jobs.queued(state, running=True)
    assert "no memory store" in jobs.failures(state)[-1]["error"]


def test_a_worker_killed_mid_job_leaves_the_job_for_the_next(tmp_path: Path, cli: CliFn) -> None:
    """The job a killed worker was running (renamed .run, never removed) is run first by the
    next worker, once."""
    from memdir import jobs

    store = MemoryStore(tmp_path / ".memory")
    done: list[str] = []

    def stop(data: dict[str, Any]) -> None:
        raise KeyboardInterrupt  # the worker dies in the middle of it

    jobs.enqueue(store.internal, "sync")
    jobs.enqueue(store.internal, "index")
    with pytest.raises(KeyboardInterrupt):
        jobs.work(store.internal, {"sync": stop})
    left = jobs.queued(store.internal, running=True)
    assert [p.suffix for p in left] == [".run", ".json"]
    ran = jobs.work(
        store.internal,
        {"sync": lambda d: done.append("sync"), "index": lambda d: done.append("index")},
    )
    assert ran == 2 and done == ["sync", "index"]
    assert jobs.queued(store.internal, running=True) == []


def test_a_job_that_ends_every_worker_is_dropped_and_logged(tmp_path: Path) -> None:
    """A job that ends the worker taking it (killed, out of memory: here an interrupt) is
    taken again by the next worker, but not for ever: after ``MAX_TRIES`` workers ended at
    it, it is dropped with its reason in the failure log and the jobs behind it run."""
    from memdir import jobs

    store = MemoryStore(tmp_path / ".memory")
    done: list[str] = []

    def stop(data: dict[str, Any]) -> None:
        raise KeyboardInterrupt

    jobs.enqueue(store.internal, "sync")
    jobs.enqueue(store.internal, "index")
    for _ in range(jobs.MAX_TRIES):
        with pytest.raises(KeyboardInterrupt):
            jobs.work(store.internal, {"sync": stop})
    assert jobs.failures(store.internal) == []
    ran = jobs.work(store.internal, {"sync": stop, "index": lambda d: done.append("index")})
    assert ran == 2 and done == ["index"]
    assert jobs.queued(store.internal, running=True) == []
    (failed,) = jobs.failures(store.internal)
    assert failed["kind"] == "sync"
    assert f"the worker ended while at this job {jobs.MAX_TRIES} times" in failed["error"]


def test_the_prompt_hook_never_recalls_the_current_sessions_own_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's turns kept as episodes are recalled into other sessions, never into the
    session they were said in (its context holds them already)."""
    from memdir.config import Config
    from memdir.integrations.hooks import prompt
    from memdir.learn.conversation import keep_episodes

    root = tmp_path / "app" / ".memory"
    store = MemoryStore(root, Config(dir=root, embedder="none"))
    keep_episodes(store, read_session(DATA / "claude_session.jsonl"))
    question = "which package manager, pnpm or npm, installs dependencies in this repo?"
    base = {"hook_event_name": "UserPromptSubmit", "prompt": question, "cwd": str(root.parent)}
    monkeypatch.setenv("MEMDIR_EMBEDDER", "none")
    other = prompt({**base, "session_id": "another"}, host="claude-code")
    same = prompt(
        {**base, "session_id": "s1", "transcript_path": str(DATA / "claude_session.jsonl")},
        host="claude-code",
    )
    assert "<episode" in other and "always use pnpm" in other
    assert "<episode" not in same


def _configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer
) -> tuple[MemoryStore, dict[str, Any]]:
    """A project with one memory, a memory model configured (the fake server) and a prompt
    event in it."""
    root = tmp_path / "app" / ".memory"
    store = MemoryStore(root)
    store.write("api-port", type="project_fact", description="The API port", body="8080")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", llm_server.url)
    monkeypatch.setenv("MEMDIR_EMBEDDER", "none")
    event = {"hook_event_name": "UserPromptSubmit", "prompt": "which API port?",
             "session_id": "s1", "cwd": str(root.parent)}  # fmt: skip
    return store, event


def test_recall_select_search_in_the_hook_asks_no_model_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer
) -> None:
    """A model is configured and recall_select = "search": the prompt hook's first, cold
    prompt asks the model nothing and the recall log says the setting chose search (never
    "no model configured")."""
    from memdir.integrations.hooks import prompt
    from memdir.recalllog import entries

    store, event = _configured(tmp_path, monkeypatch, llm_server)
    (store.root / "config.toml").write_text('recall_select = "search"\n')
    assert "api-port" in prompt(event, host="claude-code")
    assert llm_server.requests == []
    (last,) = entries(store.internal)
    assert last["note"] == "recall_select = search", last


def test_the_hooks_model_calls_are_in_the_stores_usage_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer
) -> None:
    """The prompt hook's selection call is recorded with its purpose and tokens, so that
    'memdir llm stats' shows what memory cost."""
    from memdir.integrations.hooks import prompt
    from memdir.usage import UsageLog

    store, event = _configured(tmp_path, monkeypatch, llm_server)
    llm_server.handler = lambda req: reply('{"selected": ["api-port"]}')
    assert "api-port" in prompt(event, host="claude-code", budget=30)
    rows = UsageLog(store.internal / "usage.jsonl").rows()
    assert [r["purpose"] for r in rows] == ["select"] and rows[0]["ok"]
    monkeypatch.chdir(store.root.parent)
    stats = subprocess.run(
        [sys.executable, "-m", "memdir", "llm", "stats"], capture_output=True, text=True,
        env={**child_env(), "HOME": str(tmp_path / "home")}, timeout=60,
    )  # fmt: skip
    assert stats.returncode == 0 and "select" in stats.stdout, stats.stdout


def test_the_readmes_claude_code_line_installs_working_hooks(tmp_path: Path) -> None:
    """The README's two lines for Claude Code, as written (the venv's memdir being this
    interpreter's): the user's settings get memdir's hooks, with this installation's Python,
    and the session-start hook they name answers."""
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    quick = readme.split("**Memory in Claude Code, in every project**", 1)[1]
    line = re.search(r"```bash\n(.*?)\n```", quick, re.DOTALL)
    assert line is not None and line.group(1).startswith(".venv/bin/memdir hooks install")
    args = shlex.split(line.group(1))[1:]
    env = _env(tmp_path)
    r = subprocess.run([sys.executable, "-m", "memdir", *args], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stderr
    settings = json.loads((tmp_path / "home" / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert command.startswith(sys.executable) and "hook start" in command
    project = tmp_path / "app"
    MemoryStore(project / ".memory").write(
        "tabs", type="user_preference", description="Tabs", body="Indent with tabs."
    )
    started = subprocess.run(
        shlex.split(command), input=json.dumps({"hook_event_name": "SessionStart",
        "source": "startup", "session_id": "s", "cwd": str(project)}),
        env=env, cwd=project, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "Indent with tabs." in started.stdout, started.stderr


def test_codex_trust_is_reported_and_goes_with_memdirs_hooks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex skips a hook nobody trusted without a word: doctor's list of installed hooks says
    whether Codex trusts memdir's, and uninstalling them takes their trusted hashes out of
    ~/.codex/config.toml, leaving the person's own entries and settings as they were."""
    from memdir.integrations.hostsettings import install, installed, uninstall

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    project = tmp_path / "app"
    project.mkdir()
    hooks_json, _ = install("codex", user=True, project=project)
    (status,) = [s for s in installed(project) if s.startswith("codex")]
    assert "NOT trusted in Codex yet" in status and "/hooks" in status
    data = json.loads(hooks_json.read_text())
    tables = "".join(
        f'[hooks.state."{hooks_json}:{re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()}:0:0"]\n'
        f'trusted_hash = "sha256:{i:064x}"\nenabled = true\n\n'
        for i, event in enumerate(data["hooks"])
    )
    config = home / ".codex" / "config.toml"
    mine = (
        'model = "gpt-5.5"\n\n[projects."/repo"]\ntrust_level = "trusted"\n\n'
        '[hooks.state."/elsewhere/hooks.json:stop:0:0"]\ntrusted_hash = "sha256:ab"\n\n'
    )
    config.write_text(mine + tables)
    (status,) = [s for s in installed(project) if s.startswith("codex")]
    assert status.endswith("trusted in Codex") and "NOT" not in status
    uninstall("codex", user=True, project=project)
    assert config.read_text() == mine


def test_a_learn_whose_model_was_down_is_kept_and_learned_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer
) -> None:
    """A headless one-turn session ends while the model's endpoint is down: its learn job is
    kept (not dropped), and the next worker, once the model answers, learns from it."""
    from memdir import jobs
    from memdir.config import load_config
    from memdir.integrations.workerjobs import learn_job

    root = tmp_path / "app" / ".memory"
    store = MemoryStore(root)
    event = {"hook_event_name": "Stop", "transcript_path": str(DATA / "claude_session.jsonl"),
             "cwd": str(root.parent), "session_id": "headless"}  # fmt: skip
    job = jobs.enqueue(store.internal, "learn", {"event": event, "host": "claude-code"})

    def learn(data: dict[str, Any]) -> None:
        learn_job(data, load_config({"dir": root}))

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("MEMDIR_MAX_RETRIES", "0")
    monkeypatch.setenv("MEMDIR_EMBEDDER", "none")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nobody listens
    assert jobs.work(store.internal, {"learn": learn}) == 1
    assert json.loads(job.read_text())["tries"] == 1  # kept for the next worker
    monkeypatch.setenv("ANTHROPIC_BASE_URL", llm_server.url)
    pnpm = {
        "action": "create",
        "name": "use-pnpm",
        "type": "user_preference",
        "description": "Use pnpm, never npm",
        "body": "Always use pnpm, never npm.",
    }
    llm_server.handler = lambda req: reply(json.dumps({"memories": [pnpm]}))
    assert jobs.work(store.internal, {"learn": learn}) == 1
    assert not job.exists() and jobs.failures(store.internal) == []
    user = tmp_path / "user-store"
    learned = {e.name for e in MemoryStore(root).entries()} | (
        {e.name for e in MemoryStore(user).entries()} if user.is_dir() else set()
    )
    assert "use-pnpm" in learned


def test_a_worker_for_some_kinds_leaves_the_others_queued(tmp_path: Path) -> None:
    """The resident's worker does learn, index and sync jobs; an agent's hand-over queued
    among them is left, in order, for the store's detached worker."""
    from memdir import jobs

    state = tmp_path / "state"
    first = jobs.enqueue(state, "handover", {"messages": []})
    jobs.enqueue(state, "learn", {"n": 1})
    jobs.enqueue(state, "index")
    done: list[str] = []
    handlers = {
        "learn": lambda data: done.append("learn"),
        "index": lambda data: done.append("index"),
    }
    assert jobs.work(state, handlers, only=True) == 2 and done == ["learn", "index"]
    assert jobs.queued(state) == [first] and jobs.left(state, ["learn", "index"])
    assert not jobs.failures(state)  # (a kind left alone is not a failure)
    assert jobs.work(state, {"handover": lambda data: done.append("handover")}) == 1
    assert done[-1] == "handover" and not jobs.left(state, [])


def test_the_tool_hook_reminds_of_a_convention_an_edit_breaks_and_is_silent_otherwise(
    tmp_path: Path,
) -> None:
    """PreToolUse, as Claude Code and Codex send it: an edit that breaks a standing convention
    gets a short reminder naming the rule and where; one that keeps it, a read, or a rule that
    does not stand (a teammate's, waiting for the user) gets nothing. Installed by `memdir
    hooks install`, logged in the recall log."""
    project = tmp_path / "app"
    store = MemoryStore(project / ".memory")
    store.write("function-name-prefix", type="feedback",
                description="Always start function names with 'x_'",
                body="Always start function names with 'x_'.")  # fmt: skip
    store.write("use-pnpm", type="feedback", description="Use pnpm, never npm",
                body="Always use pnpm, never npm.")  # fmt: skip
    (project / ".memory" / "method-decorator.md").write_text(  # a door's rule: not the user's
        "---\nname: method-decorator\ntype: feedback\ndescription: Always add the '@trace'"
        " decorator to all methods\n---\nAlways add the '@trace' decorator to all methods.\n"
    )
    env = _env(tmp_path)
    base = {"session_id": "s1", "cwd": str(project), "hook_event_name": "PreToolUse"}
    bad = {**base, "tool_name": "Edit", "tool_input": {
        "file_path": str(project / "app.py"), "old_string": "pass",
        "new_string": "    def helper(a, b):\n        return a + b\n"}}  # fmt: skip
    r = hook(["tool", "--host", "claude-code"], bad, tmp_path, env)
    assert r.returncode == 0 and r.stderr == ""
    out = json.loads(r.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse"
    text = out["additionalContext"]
    assert "Always start function names with 'x_'" in text and "'helper'" in text
    assert "@trace" not in text  # waiting for the user: never presented as a rule
    started = {"hook_event_name": "SessionStart", "session_id": "s2", "cwd": str(project)}
    assert "x_" in hook(["start"], started, tmp_path, env).stdout  # the session's own rules:
    r = hook(["tool", "--host", "claude-code"], {**bad, "session_id": "s2"}, tmp_path, env)
    assert "'helper'" in r.stdout and "@trace" not in r.stdout  # those it was given are held
    good = {**bad, "tool_input": {**bad["tool_input"], "new_string": "def x_helper(a):\n  pass"}}
    assert hook(["tool", "--host", "claude-code"], good, tmp_path, env).stdout == ""
    read = {**base, "tool_name": "Read", "tool_input": {"file_path": str(project / "app.py")}}
    assert hook(["tool", "--host", "claude-code"], read, tmp_path, env).stdout == ""
    npm = {**base, "tool_name": "Bash", "tool_input": {"command": "npm install lodash"}}
    r = hook(["tool", "--host", "claude-code"], npm, tmp_path, env)
    assert "Always use pnpm, never npm." in r.stdout and "runs npm" in r.stdout
    pnpm = {**base, "tool_name": "Bash", "tool_input": {"command": "pnpm add lodash"}}
    assert hook(["tool", "--host", "claude-code"], pnpm, tmp_path, env).stdout == ""
    patch = "*** Begin Patch\n*** Add File: src/m.py\n+def compute():\n+    return 1\n*** End Patch"
    codex = {**base, "tool_name": "apply_patch", "tool_input": {"command": patch}}
    r = hook(["tool", "--host", "codex"], codex, tmp_path, env)
    assert "'compute'" in r.stdout
    log = memdir(["recall-log", "--json"], project, env)
    assert '"tool:claude-code"' in log and "function-name-prefix" in log
    r = subprocess.run([sys.executable, "-m", "memdir", "hooks", "install", "claude-code",
                        "--scope", "user"], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)  # fmt: skip
    settings = json.loads((tmp_path / "home" / ".claude" / "settings.json").read_text())
    group = settings["hooks"]["PreToolUse"][0]
    assert group["matcher"] == "Write|Edit|MultiEdit|Bash" and "hook tool" in str(group)


def test_without_a_memory_model_learning_keeps_the_turns_and_says_so_once(
    tmp_path: Path,
) -> None:
    """No key, no host CLI: the learn job keeps the conversation's turns as episodes (recall
    finds them), extracts nothing, and says so in doctor and once in the recall log."""
    project = tmp_path / "app"
    MemoryStore(project / ".memory")
    env = _env(tmp_path, PATH="/usr/bin:/bin")
    session = tmp_path / "s.jsonl"
    session.write_text(
        json.dumps({"type": "user", "message": {"role": "user",
                    "content": "The flaky test is test_checkout; it needs the fake clock."}})
        + "\n" + json.dumps({"type": "assistant", "message": {"role": "assistant",
                             "content": "Understood."}}) + "\n"
    )  # fmt: skip
    event = {"transcript_path": str(session), "cwd": str(project), "hook_event_name": "Stop"}
    log = state_dir(project / ".memory") / "hooks.jsonl"
    for n in (1, 2):
        assert hook(["learn", "--host", "claude-code"], event, tmp_path, env).returncode == 0
        assert _wait_for(lambda n=n: log.exists() and log.read_text().count("no memory model") == n)
    first = json.loads(log.read_text().splitlines()[0])
    assert first["status"] == "ok" and first["saved"] == []
    assert "turns are kept, nothing was extracted" in first["note"]
    doctor = subprocess.run([sys.executable, "-m", "memdir", "doctor"], cwd=project, env=env,
                            capture_output=True, text=True)  # fmt: skip
    assert "no memory model: the conversation's turns are kept" in doctor.stdout
    assert "test_checkout" in memdir(["recall", "which test is flaky?"], project, env)
    assert memdir(["recall-log", "--json"], project, env).count("no memory model") == 1


def test_why_a_session_started_is_in_the_recall_log(tmp_path: Path) -> None:
    project = tmp_path / "app"
    MemoryStore(project / ".memory").write(
        "tabs", type="user_preference", description="Tabs", body="Indent with tabs."
    )
    event = {"hook_event_name": "SessionStart", "source": "compact", "session_id": "s",
             "cwd": str(project)}  # fmt: skip
    env = _env(tmp_path)
    assert "Indent with tabs." in hook(["start"], event, tmp_path, env).stdout
    assert "(session start: compact)" in memdir(["recall-log", "--json"], project, env)


def memdir(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    """``memdir ARGS`` in ``cwd``: what it printed (it must succeed)."""
    r = subprocess.run([sys.executable, "-m", "memdir", *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_a_pipe_or_a_relabelled_job_is_dropped_and_the_queue_goes_on(tmp_path: Path) -> None:
    """A FIFO placed in the queue as a job, and a job file named for one kind whose body
    names another (an index job that would run as a learn), are each dropped with the reason
    in the failure log; the worker does not block and the next job runs."""
    from memdir import jobs

    store = MemoryStore(tmp_path / ".memory")
    queue = jobs.folder(store.internal)
    queue.mkdir(parents=True, exist_ok=True)
    os.mkfifo(queue / "1-1-learn.json")
    (queue / "2-1-index.json").write_text(json.dumps({"kind": "learn", "data": {}, "tries": 0}))
    jobs.enqueue(store.internal, "index")
    assert _work(store.root).returncode == 0
    assert jobs.queued(store.internal, running=True) == []
    errors = [f["error"] for f in jobs.failures(store.internal)]
    assert any("not a regular file" in e for e in errors)
    assert any("its body names a 'learn' job" in e for e in errors)
    assert len(errors) == 2  # (the real index job ran)


def test_the_learn_hook_queues_without_reading_the_store(tmp_path: Path) -> None:
    """The learn hook only queues the job: a store of hand-written files it is the first to
    see is not read (no catalogue, no index, no log of hand edits) until the worker runs."""
    from memdir import jobs
    from memdir.integrations import hooks

    root = tmp_path / "app" / ".memory"
    root.mkdir(parents=True)
    for i in range(50):
        (root / f"note-{i}.md").write_text(
            f"---\nname: note-{i}\ntype: project_fact\ndescription: note {i}\n---\nbody {i}\n"
        )
    session = tmp_path / "s.jsonl"
    session.write_text(json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}}))
    event = {"transcript_path": str(session), "cwd": str(root.parent), "hook_event_name": "Stop"}
    taken: list[Path] = []
    job = hooks.learn(event, host="claude-code", worker=lambda state, config: taken.append(state))
    state = state_dir(root)
    assert job is not None and taken == [state] and jobs.queued(state) == [job]
    assert sorted(p.name for p in state.iterdir()) == ["folder.json", "jobs"]  # (which folder)


def test_a_key_without_its_sdk_names_the_extra_to_install(tmp_path: Path) -> None:
    """An API key set where the model's SDK is not installed (a PATH install without the
    extra): the learn keeps the turns, and doctor names the extra that is missing."""
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class NoSDK:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'anthropic':\n"
        "            raise ImportError('No module named anthropic', name='anthropic')\n"
        "sys.meta_path.insert(0, NoSDK())\n"
    )
    project = tmp_path / "app"
    MemoryStore(project / ".memory")
    env = _env(tmp_path, PATH="/usr/bin:/bin", PYTHONPATH=str(blocker), ANTHROPIC_API_KEY="k")
    event = {"transcript_path": str(DATA / "claude_session.jsonl"), "cwd": str(project),
             "hook_event_name": "Stop"}  # fmt: skip
    assert hook(["learn", "--host", "claude-code"], event, tmp_path, env).returncode == 0
    log = state_dir(project / ".memory") / "hooks.jsonl"
    assert _wait_for(lambda: log.exists() and "no memory model" in log.read_text())
    doctor = memdir(["doctor"], project, env)
    assert "the anthropic SDK is not installed — pip install 'memdir[anthropic]'" in doctor


def _workers(state_home: str) -> list[int]:
    """The memdir worker processes of the user whose state folder is ``state_home``."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        ours = f"XDG_STATE_HOME={state_home}".encode() in env
        if ours and b"work" in cmd and b"memdir" in b" ".join(cmd):
            found.append(int(pid))
    return found


@pytest.mark.slow
def test_a_program_searching_eight_stores_leaves_one_worker_for_all(tmp_path: Path) -> None:
    """A library program opens eight fresh stores of 300 memories and searches each once:
    each hands its backlog to the background, and one worker for the user embeds them all,
    then leaves."""
    from memdir import jobs
    from memdir.config import Config

    stores = []
    for n in range(8):
        root = tmp_path / f"s{n}" / ".memory"
        root.mkdir(parents=True)
        for i in range(300):
            (root / f"m-{i}.md").write_text(
                f"---\nname: m-{i}\ntype: project_fact\ndescription: fact {i} of store {n}\n---\n"
                f"Store {n} holds fact number {i} about deploys.\n"
            )
        stores.append(MemoryStore(root, Config(dir=root, embedder="minilm")))
    for store in stores:
        assert store.search("deploys")
    seen: set[int] = set()
    home = os.environ["XDG_STATE_HOME"]

    def drained() -> bool:
        seen.update(_workers(home))
        return not any(jobs.queued(s.internal, running=True) for s in stores) and not _workers(home)

    assert _wait_for(drained, 300)
    assert len(seen) == 1  # one worker, for all eight
    for store in stores:
        assert MemoryStore(store.root, Config(dir=store.root, embedder="minilm")).index.backlog == 0


def test_the_users_worker_leaves_a_job_kept_for_later_and_ends(tmp_path: Path) -> None:
    """A store whose job asks to be tried later (its model was down) and one with work that
    can be done: the user's worker does the one, keeps the other (tried once, not five times
    in a row), and ends."""
    from memdir import jobs

    down, fine = MemoryStore(tmp_path / "a" / ".memory"), MemoryStore(tmp_path / "b" / ".memory")
    jobs.enqueue(down.internal, "learn", {"host": None})
    jobs.enqueue(fine.internal, "index")
    done: list[str] = []

    def later(data: jobs.Data) -> None:
        raise jobs.Later("the model is down")

    def handlers(state: Path, root: Path) -> dict[str, jobs.Handler]:
        return {"learn": later, "index": lambda data: done.append(str(root))}

    assert jobs.work_all(handlers) == 2
    assert done == [str(fine.root)] and jobs.queued(fine.internal) == []
    kept = jobs.queued(down.internal)
    assert len(kept) == 1 and json.loads(kept[0].read_text())["tries"] == 1


def test_recall_late_by_meaning_answers_from_full_text_instead_of_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_server: Any
) -> None:
    """An embedder that answers later than the hook may wait (a busy machine, a cold model, a
    slow endpoint): the hook recalls what full text finds, within its time, and the recall
    log says why — recall is never skipped while full text has an answer."""
    from memdir.integrations import hooks
    from memdir.recalllog import entries

    project = tmp_path / "app"
    root = project / ".memory"
    (root).mkdir(parents=True)
    (root / "config.toml").write_text(
        f'embedder = "http"\nembed_url = "{llm_server.url}/v1"\nembed_model = "slow"\n'
    )
    trust(root / "config.toml")
    store = MemoryStore(root)
    store.write("deploy-days", type="project_fact", description="Deploys happen on Fridays",
                body="We deploy on Fridays after lunch.")  # fmt: skip
    llm_server.embed_text = lambda text: [1.0] * 8
    assert store.index.embed_all() == 1

    def slow(text: str) -> list[float]:
        time.sleep(8)
        return [1.0] * 8

    llm_server.embed_text = slow
    event = {"prompt": "when do we deploy?", "cwd": str(project), "session_id": "s1"}
    started = time.monotonic()
    out = hooks.prompt(event, host="claude-code", budget=0.2)
    assert time.monotonic() - started < 6  # the hook's time, not the embedder's
    assert "We deploy on Fridays" in out
    (logged,) = entries(store.internal)
    assert "embedding the question took over 3 s; used full text" in logged["note"]


def test_the_recall_log_says_recalled_only_for_what_reached_the_model(tmp_path: Path) -> None:
    """A memory held for review that search picked for a prompt injected nothing: the recall
    log (and Activity, which reads it) does not say it was recalled, and its note says it was
    held back."""
    from memdir.gate.decisions import Hold, hold
    from memdir.integrations import hooks
    from memdir.recalllog import entries

    project = tmp_path / "app"
    root = project / ".memory"
    store = MemoryStore(root)
    store.write("deploy-days", type="project_fact", description="Deploys happen on Fridays",
                body="We deploy on Fridays.")  # fmt: skip
    store.write("deploy-script", type="project_fact", description="Deploy with the deploy script",
                body="Run ./deploy.sh to deploy.", source="sync")  # fmt: skip
    digest = store.get("deploy-script").digest or ""
    hold(root, [Hold("deploy-script", digest, "arrived by sync", "eve")])
    event = {"prompt": "how do we deploy?", "cwd": str(project), "session_id": "s1"}
    out = hooks.prompt(event, host="claude-code")
    assert "We deploy on Fridays" in out and "deploy.sh" not in out
    (logged,) = entries(store.internal)
    assert [m["name"] for m in logged["memories"]] == ["deploy-days"]
    assert "held back from the model: deploy-script" in logged["note"]
