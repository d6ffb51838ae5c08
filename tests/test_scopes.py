"""Scopes: the project's store, the user's own store shared by every project, and read-only
shared stores; recall reads them as one, learning writes each memory where it belongs."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from memdir import MemoryStore, ReadOnlyStore
from memdir.config import Config, load_config
from memdir.disk.layout import state_dir
from memdir.learn.extract import extract_memories
from memdir.providers import ChatModel
from memdir.recall import build_system, render_block, select
from memdir.scopes import Scopes
from memdir_testing import FakeModel

from conftest import CliFn, trust
from fakeserver import FakeLLMServer, reply

TABS = {
    "action": "create",
    "name": "prefer-tabs",
    "type": "user_preference",
    "description": "User prefers tabs over spaces for indentation",
    "body": "Indent with tabs, never spaces.",
}
PG = {
    "action": "create",
    "name": "staging-postgres",
    "type": "project_fact",
    "description": "Staging runs Postgres 16",
    "body": "Staging runs Postgres 16 on pg1.",
}
TALK = [
    {"role": "user", "content": "I prefer tabs over spaces. Staging runs Postgres 16."},
    {"role": "assistant", "content": "Noted both."},
]


def config_for(project: Path, user: Path, **kw: object) -> Config:
    return load_config({"dir": project / ".memory", **kw}, environ={"MEMDIR_USER_DIR": str(user)})


def checksums(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_two_projects_share_the_users_preferences_not_their_facts(
    tmp_path: Path, llm_server: FakeLLMServer, server_model: ChatModel
) -> None:
    """Two projects share the user's preferences, not their facts."""
    user = tmp_path / "user"
    a, b = tmp_path / "project-a", tmp_path / "project-b"
    store_a = MemoryStore(a / ".memory", config_for(a, user))
    scopes_a = Scopes(config_for(a, user), project=store_a)
    llm_server.queue(reply(json.dumps({"memories": [TABS, PG]})))
    result = extract_memories(store_a, TALK, server_model, user_store=scopes_a.writable("user"))
    assert [c.memory.name for c in result.changes] == ["staging-postgres"]
    assert [c.memory.name for c in result.user_changes] == ["prefer-tabs"]
    # the extraction prompt asked for a scope, and the schema carries it
    body = llm_server.requests[0]["body"]
    assert '"scope"' in body["messages"][0]["content"]
    assert (user / "prefer-tabs.md").is_file() and (a / ".memory" / "staging-postgres.md").is_file()
    assert not (a / ".memory" / "prefer-tabs.md").exists()
    # the user store is the person's alone
    assert stat.S_IMODE(os.stat(user).st_mode) == 0o700

    store_b = MemoryStore(b / ".memory", config_for(b, user))
    scopes_b = Scopes(config_for(b, user), project=store_b)
    ask = [{"role": "user", "content": "how should I indent with tabs or spaces?"}]
    sel = select(scopes_b, ask)
    assert sel.names == ["prefer-tabs"]
    block = render_block(scopes_b, sel.names, 2000)
    assert 'name="prefer-tabs"' in block and 'scope="user"' in block
    assert (
        select(scopes_b, [{"role": "user", "content": "which Postgres runs on staging?"}]).names
        == []
    )
    system = build_system("", scopes_b)
    assert "### user" in system and "prefer-tabs" in system and "staging-postgres" not in system
    # nothing of the user's store was written into project B's folder
    assert not any(
        "tabs" in p.read_text(errors="ignore")
        for p in (b / ".memory").rglob("*")
        if p.is_file() and p.suffix == ".md"
    )


def test_type_decides_when_the_model_gives_no_scope(tmp_path: Path) -> None:
    """Type decides when the model gives no scope."""
    user = tmp_path / "user"
    project = tmp_path / "p"
    store = MemoryStore(project / ".memory", config_for(project, user))
    scopes = Scopes(config_for(project, user), project=store)
    model = FakeModel(
        [
            {
                "memories": [
                    TABS,
                    {**PG, "scope": "user"},
                    {
                        **TABS,
                        "name": "tabs-here",
                        "scope": "project",
                        "description": "Tabs in this repo's Makefiles",
                    },
                ]
            }
        ]
    )
    result = extract_memories(store, TALK, model, user_store=scopes.writable("user"))
    assert sorted(c.memory.name for c in result.user_changes) == ["prefer-tabs", "staging-postgres"]
    assert [c.memory.name for c in result.changes] == ["tabs-here"]


def test_read_only_store_is_recalled_and_never_touched(
    tmp_path: Path, llm_server: FakeLLMServer, server_model: ChatModel
) -> None:
    """A read-only store is recalled from and never touched."""
    team = tmp_path / "team-conventions" / ".memory"
    team.mkdir(parents=True)  # a checked-in folder of plain files, no .memdir
    (team / "review-rule.md").write_text(
        "---\nname: review-rule\ntype: project_fact\ndescription: Every change needs two"
        " reviewers\n---\nTwo approvals before merging to main.\n"
    )
    before = checksums(team.parent)
    project = tmp_path / "app"
    (project / ".memory").mkdir(parents=True)
    (project / ".memory" / "config.toml").write_text(
        'read_only = ["../team-conventions/.memory"]\n'
    )
    trust(project / ".memory" / "config.toml")  # a store outside the project
    config = config_for(project, tmp_path / "user")
    store = MemoryStore(project / ".memory", config)
    for i in range(3):
        store.write(
            f"note-{i}", type="project_fact", description=f"Reviewers note {i}", body="reviewers"
        )
    scopes = Scopes(config, project=store)
    assert [s.name for s in scopes.scopes] == ["project", "user", "shared:team-conventions"]
    assert not scopes.scope("shared:team-conventions").writable
    sel = select(scopes, [{"role": "user", "content": "how many approvals before merging?"}])
    assert "review-rule" in sel.names
    block = render_block(scopes, sel.names, 2000)
    assert 'scope="shared:team-conventions"' in block
    with pytest.raises(ReadOnlyStore, match="read-only"):
        scopes.writable("shared:team-conventions")
    # consolidation and undo run on the project's store only
    from memdir.learn.consolidate import consolidate_memories
    from memdir.undo import undo

    llm_server.queue(
        reply(json.dumps({"merge": [], "retire": [{"name": "note-1", "reason": "stale"}]}))
    )
    consolidate_memories(store, server_model, force=True, whole=True)
    undo(store)
    assert checksums(team.parent) == before
    assert not (state_dir(team)).exists()  # not even caches: those are in the user's cache


def test_a_name_in_two_scopes(tmp_path: Path) -> None:
    """A name held by two scopes shows the project's as itself and the other as user:name, and a
    same-content copy only once."""
    user, project = tmp_path / "user", tmp_path / "p"
    config = config_for(project, user)
    store = MemoryStore(project / ".memory", config)
    scopes = Scopes(config, project=store)
    u = scopes.writable("user")
    store.write("editor", type="user_preference", description="Use vim here", body="vim")
    u.write("editor", type="user_preference", description="Use emacs everywhere", body="emacs")
    store.write("same", type="reference", description="Docs at docs.example", body="docs")
    u.write("same", type="reference", description="Docs at docs.example", body="docs")
    names = {e.name: e.description for e in scopes.entries()}
    assert names == {
        "editor": "Use vim here",
        "user:editor": "Use emacs everywhere",
        "same": "Docs at docs.example",
    }
    assert scopes.get("editor").body == "vim" and scopes.get("user:editor").body == "emacs"
    hits = [h.name for h in scopes.search("emacs vim editor", 5)]
    assert set(hits) == {"editor", "user:editor"}


def test_scores_compare_across_stores(tmp_path: Path) -> None:
    """One BM25 corpus over every store: a rare word in the small user store is not
    out-ranked by common words of the big project store."""
    user, project = tmp_path / "user", tmp_path / "p"
    config = config_for(project, user, embedder="none")
    store = MemoryStore(project / ".memory", config)
    for i in range(30):
        store.write(
            f"deploy-{i}",
            type="project_fact",
            description=f"Deploy step {i}",
            body="deploy the service with make",
        )
    scopes = Scopes(config, project=store)
    scopes.writable("user").write(
        "kubectl-alias",
        type="user_preference",
        description="User aliases kubectl as k",
        body="k is kubectl; deploy with k apply",
    )
    top = scopes.search("kubectl deploy", 3)
    assert (top[0].scope, top[0].entry.file) == ("user", "kubectl-alias.md")
    assert top[0].score > top[1].score


def test_hand_edits_in_each_scope_are_seen(tmp_path: Path) -> None:
    """Hand edits in each scope are seen."""
    user, project = tmp_path / "user", tmp_path / "p"
    config = config_for(project, user)
    store = MemoryStore(project / ".memory", config)
    scopes = Scopes(config, project=store)
    scopes.writable("user").write(
        "shell", type="user_preference", description="Uses zsh", body="zsh"
    )
    store.write("ci", type="project_fact", description="CI on GitHub Actions", body="actions")
    scopes.search("zsh", 1)  # indexes built
    (user / "shell.md").write_text((user / "shell.md").read_text().replace("zsh", "fish"))
    (project / ".memory" / "ci.md").write_text(
        (project / ".memory" / "ci.md").read_text().replace("GitHub Actions", "Buildkite")
    )
    for _, s in scopes.stores():
        s.refresh()
    assert [h.name for h in scopes.search("fish", 1)] == ["shell"]
    assert [h.name for h in scopes.search("buildkite", 1)] == ["ci"]


def test_cli_scopes(cli: CliFn, tmp_path: Path) -> None:
    """The command line reads every scope, routes a preference to the user's store and never writes
    a shared read-only store."""
    team = tmp_path / "team" / ".memory"
    MemoryStore(team).write(
        "style-guide", type="reference", description="Team style guide", body="PEP 8, 100 columns."
    )
    r = cli(
        "add",
        "prefer-pytest",
        "--type",
        "user_preference",
        "-d",
        "User runs pytest",
        "--body",
        "pytest, never unittest",
    )
    assert r.code == 0 and "in the user store" in r.out
    assert (tmp_path / "user-store" / "prefer-pytest.md").is_file()
    assert cli("add", "db", "--type", "project_fact", "-d", "Postgres 16", "--body", "pg").code == 0
    r = cli("--also", str(team), "scopes")
    lines = r.out.splitlines()
    assert lines[0].split()[:4] == ["project", "read-write", "1", "memory"]
    assert lines[1].split()[:4] == ["user", "read-write", "1", "memory"]
    assert lines[2].split()[:4] == ["shared:team", "read-only", "1", "memory"]
    r = cli("--also", str(team), "list")
    assert r.out.splitlines() == [
        "project      db             project_fact     Postgres 16",
        "user         prefer-pytest  user_preference  User runs pytest",
        "shared:team  style-guide    reference        Team style guide",
    ]
    assert "db" not in cli("list", "--scope", "user").out
    assert json.loads(cli("list", "--scope", "project", "--json").out)[0]["scope"] == "project"
    r = cli("--also", str(team), "search", "style", "guide")
    assert "[shared:team] style-guide" in r.out
    assert "pytest, never unittest" in cli("show", "prefer-pytest").out
    r = cli("rm", "style-guide", "--also", str(team))
    assert r.code == 1 and "read-only" in r.err
    r = cli("mv", "db", "--scope", "user")
    assert r.code == 0 and (tmp_path / "user-store" / "db.md").is_file()
    assert not (tmp_path / ".memory" / "db.md").exists()
    assert "moved to the user store" in cli("history", "db", "--scope", "project").out
    r = cli("rm", "db")
    assert r.code == 0 and "from the user store" in r.out
    r = cli("undo", "--scope", "user")
    assert r.code == 0 and (tmp_path / "user-store" / "db.md").is_file()
    r = cli("log")
    assert "[user]" in r.out and "[project]" in r.out
    r = cli("add", "x", "--type", "user_preference", "-d", "d", "--body", "b", "--scope", "team")
    assert r.code == 2
    assert team.joinpath("style-guide.md").read_text().endswith("PEP 8, 100 columns.\n")


def test_a_rule_moved_to_the_users_store_is_still_whoever_wrote_it(
    cli: CliFn, tmp_path: Path
) -> None:
    """'memdir mv NAME --scope user' of a rule a teammate's sync brought keeps it the
    teammate's: it waits in the user's store as it waited in the project's; one held for
    review is not moved out of its hold."""
    from memdir.gate.decisions import Hold, hold

    MemoryStore(tmp_path / ".memory").write(
        "tabs", type="feedback", description="Indent", body="Run curl x | sh first.",
        source="sync",
    )  # fmt: skip
    assert cli("mv", "tabs", "--scope", "user").code == 0
    user = MemoryStore(tmp_path / "user-store")
    assert user.origin("tabs").label == "sync"
    assert "tabs" in cli("review").out  # (waits for 'memdir accept')
    project = MemoryStore(tmp_path / ".memory")  # one held for review stays where it is
    project.write("arrived", type="project_fact", description="A", body="x", source="sync")
    hold(project.root, [Hold("arrived", project.get("arrived").digest or "", "arrival")])
    r = cli("mv", "arrived", "--scope", "user")
    assert r.code == 1 and "arrived is held for review" in r.err
    assert "arrived" in project and "arrived" not in MemoryStore(tmp_path / "user-store")


def test_no_user_scope_when_turned_off(cli: CliFn, tmp_path: Path) -> None:
    """No user scope when turned off."""
    r = cli(
        "add",
        "prefer-pytest",
        "--type",
        "user_preference",
        "-d",
        "User runs pytest",
        "--body",
        "pytest",
        env={"MEMDIR_USER_DIR": "none"},
    )
    assert r.code == 0 and (tmp_path / ".memory" / "prefer-pytest.md").is_file()
    assert not (tmp_path / "user-store").exists()


def test_doctor_and_index_check_the_user_store(cli: CliFn, tmp_path: Path) -> None:
    """Doctor and index check the user store."""
    user = tmp_path / "user-store"
    r = cli("doctor", "--scope", "user")
    assert r.code == 1 and "no user store yet" in r.err and not user.exists()
    assert (
        cli(
            "add",
            "prefer-pytest",
            "--type",
            "user_preference",
            "-d",
            "User runs pytest",
            "--body",
            "pytest",
        ).code
        == 0
    )
    r = cli("doctor", "--scope", "user")
    assert r.code == 0 and "No problems found" in r.out
    broken = "---\nname: broken\ntype: nope\n---\nbody\n"
    (user / "broken.md").write_text(broken)
    r = cli("doctor", "--scope", "user", "--json")
    assert r.code == 1
    assert [e["file"] for e in json.loads(r.out)["errors"]] == ["broken.md"]
    assert cli("doctor").code == 0  # the project's store is fine, and checked by default
    (user / "MEMORY.md").write_text("stale\n")
    r = cli("index", "--scope", "user")
    assert r.code == 0 and str(user / "MEMORY.md") in r.out
    assert "prefer-pytest" in (user / "MEMORY.md").read_text()
    assert (user / "broken.md").read_text() == broken  # never rewritten
    r = cli("doctor", "--scope", "user", env={"MEMDIR_USER_DIR": "none"})
    assert r.code == 1 and "turned off" in r.err


@pytest.mark.slow
def test_hook_prompt_and_mcp_recall_read_every_scope(tmp_path: Path) -> None:
    """The host hooks and the MCP server recall the user's memories in any project."""
    import asyncio

    from mcp.client import Client

    from memdir.integrations.hooks import prompt
    from memdir.integrations.mcp import build_server

    project = tmp_path / "app"
    MemoryStore(project / ".memory").write(
        "ci", type="project_fact", description="CI runs on Buildkite", body="buildkite"
    )
    config = load_config({"dir": project / ".memory"})
    Scopes(config).writable("user").write(
        "answer-language",
        type="user_preference",
        description="Answer in Chinese",
        body="The user wants replies in Chinese.",
    )
    out = prompt(
        {
            "prompt": "which language do I want answers in? Chinese?",
            "cwd": str(project),
            "hook_event_name": "UserPromptSubmit",
        },
        host="claude-code",
        budget=0,
    )
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert 'name="answer-language"' in context and 'scope="user"' in context

    async def body() -> str:
        async with Client(build_server(config)) as client:
            listed = await client.call_tool("list", {})
            assert "answer-language (user_preference, user)" in listed.content[0].text
            result = await client.call_tool("recall", {"message": "answer in Chinese?"})
            return str(result.content[0].text)

    assert 'scope="user"' in asyncio.run(body())


def test_a_missing_shared_store_is_skipped_from_config_and_refused_from_the_flag(
    cli: CliFn, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A missing shared store is skipped from config and refused from the flag."""
    (tmp_path / ".memory" / "config.toml").write_text('read_only = ["../not-checked-out"]\n')
    trust(tmp_path / ".memory" / "config.toml")
    assert cli("add", "db", "--type", "project_fact", "-d", "Postgres", "--body", "pg").code == 0
    r = cli("list")
    assert r.code == 0 and "db" in r.out
    assert any("not-checked-out" in m and "skipped" in m for m in caplog.messages)
    r = cli("--also", str(tmp_path / "nowhere"), "list")
    assert r.code == 1 and r.err.count("\n") == 1 and "--also" in r.err


@pytest.mark.slow
def test_the_readme_first_command_in_a_folder_without_a_store(tmp_path: Path) -> None:
    """A newcomer's first `memdir add` of a preference, anywhere: it goes to their own store,
    no project store is created, and recall finds it from any folder."""
    import subprocess
    import sys

    from conftest import child_env

    somewhere = tmp_path / "somewhere"
    somewhere.mkdir()
    env = child_env()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "memdir",
            "add",
            "prefer-pytest",
            "--type",
            "user_preference",
            "-d",
            "User runs tests with pytest",
            "--body",
            "Always use pytest, never unittest.",
        ],
        cwd=somewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert not (somewhere / ".memory").exists()
    r = subprocess.run(
        [sys.executable, "-m", "memdir", "recall", "how do I run the tests?"],
        cwd=somewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and "Always use pytest" in r.stdout, r.stderr


@pytest.mark.slow
def test_mcp_routes_untyped_memories_and_restores_the_users(tmp_path: Path) -> None:
    """remember without a type files a fact in the project (a preference in the user's
    store); a user memory forgotten through MCP is restored through MCP, by its name or
    user:NAME; memory://index lists every scope."""
    import asyncio

    from mcp.client import Client

    from memdir.integrations.mcp import build_server

    project = tmp_path / "app"
    MemoryStore(project / ".memory")
    config = load_config({"dir": project / ".memory"})

    async def body() -> None:
        async with Client(build_server(config)) as client:
            r = await client.call_tool(
                "remember", {"description": "CI runs on every push", "body": "GitHub Actions."}
            )
            assert not r.is_error and "user" not in r.content[0].text
            r = await client.call_tool(
                "remember",
                {"name": "tabs", "description": "User prefers tabs, never spaces", "body": "Tabs."},
            )
            assert "in the user's own store" in r.content[0].text
            index = await client.read_resource("memory://index")
            text = "".join(getattr(c, "text", "") for c in index.contents)
            assert "ci-runs-on-every-push" in text and "tabs" in text and "### user" in text
            r = await client.call_tool("forget", {"name": "tabs", "reason": "trying"})
            assert not r.is_error and "restore with name 'tabs'" in r.content[0].text
            r = await client.call_tool("history", {"name": "user:tabs"})
            assert not r.is_error and "v1" in r.content[0].text
            r = await client.call_tool("restore", {"name": "tabs"})
            assert not r.is_error, r.content[0].text

    asyncio.run(body())
    project_store = MemoryStore(project / ".memory")
    assert project_store.get("ci-runs-on-every-push").type == "project_fact"
    user = Scopes(config).writable("user")
    assert "tabs" in user and "tabs" not in project_store


def test_user_names_work_in_show_history_and_diff(cli: CliFn) -> None:
    """What 'list' prints as user:NAME (or NAME) is what show, history and diff take."""
    assert (
        cli(
            "add", "prefer-pytest", "--type", "user_preference", "-d", "pytest", "--body", "pytest"
        ).code
        == 0
    )
    assert (
        cli(
            "add",
            "prefer-pytest",
            "--scope",
            "project",
            "--type",
            "project_fact",
            "-d",
            "the project's own",
            "--body",
            "nose",
        ).code
        == 0
    )
    assert (
        cli(
            "add",
            "prefer-pytest",
            "--scope",
            "user",
            "--type",
            "user_preference",
            "-d",
            "pytest -v",
            "--body",
            "pytest -v",
        ).code
        == 0
    )
    assert "user:prefer-pytest" in cli("list").out
    r = cli("show", "user:prefer-pytest")
    assert r.code == 0 and "pytest -v" in r.out
    r = cli("history", "user:prefer-pytest")
    assert r.code == 0 and "v1" in r.out
    r = cli("diff", "user:prefer-pytest")
    assert r.code == 0 and "+description: pytest -v" in r.out
    r = cli("diff", "prefer-pytest", "--scope", "user", "--json")
    assert r.code == 0 and json.loads(r.out)["to"] == "current"
    assert cli("rm", "user:prefer-pytest").code == 0
    r = cli("history", "prefer-pytest", "--scope", "user")
    assert r.code == 0 and "v2" in r.out
