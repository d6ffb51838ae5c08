"""Memories in PostgreSQL (``PgStore``) against a real server with pgvector started on
127.0.0.1: its own surface, many writers on one store, a writer killed mid-plan,
other hosts' writes heard through LISTEN/NOTIFY, the round trip through files, the command
line and the trust boundary (what every backend does alike: test_store_contract.py)."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memdir import MemoryStore
from memdir.config import Config, load_config
from memdir.errors import ConflictError, MemdirError, StoreNotFound
from memdir.undo import undo
from memdir_postgres.pg import PgStore
from memdir_postgres.transfer import export, import_store
from test_store_contract import fill

from conftest import CliFn, child_env, trust
from fakeserver import FakeLLMServer

pytestmark = pytest.mark.postgres
GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def until(check: Callable[[], bool], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


@pytest.fixture
def pg(pg_config: Config, tmp_path: Path) -> Iterator[PgStore]:
    store = PgStore(pg_config, root=tmp_path / "state")
    yield store
    store.close()


def test_a_missing_store_or_server_is_one_line(pg_config: Config, tmp_path: Path) -> None:
    """A missing store or server is one line."""
    gone = dataclasses.replace(pg_config, store="never-made")
    with pytest.raises(StoreNotFound, match="memdir init"):
        PgStore(gone, create=False, root=tmp_path / "s")
    assert pg_config.database_url is not None
    bare = re.sub(r"postgres:[^@]+@", "postgres@", pg_config.database_url)  # no password
    with pytest.raises(MemdirError, match="password"):
        PgStore(dataclasses.replace(pg_config, database_url=bare), root=tmp_path / "s")
    down = dataclasses.replace(pg_config, database_url="postgresql://postgres@127.0.0.1:1/x")
    with pytest.raises(
        MemdirError, match=r"cannot connect to postgresql://postgres@127\.0\.0\.1:1"
    ):
        PgStore(down, root=tmp_path / "s")


CHILD = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from memdir.config import Config
    from memdir.errors import ConflictError
    from memdir_postgres.pg import PgStore
    from memdir.plan import Put
    config = Config(database_url=os.environ["URL"], store=os.environ["STORE"], embedder="none")
    store = PgStore(config, root=Path(os.environ["STATE"]))
    tag, n = sys.argv[1], int(sys.argv[2])
    for i in range(n):
        store.write(f"{tag}-{i}", type="project_fact", description=f"fact {i} of {tag}")
        while True:  # read-modify-write of one shared memory: a lost update would show
            mem = store.get("tally")
            try:
                store.apply([Put(mem.replace(body=mem.body + f" {tag}-{i}"), expect=mem.digest)])
                break
            except ConflictError:
                continue
    """
)


@pytest.mark.slow
def test_many_writers_lose_nothing(pg: PgStore, pg_config: Config, tmp_path: Path) -> None:
    """Many writers lose nothing."""
    pg.write("tally", type="project_fact", description="one line per write")
    env = {
        **child_env(),
        "URL": str(pg_config.database_url),
        "STORE": pg_config.store,
        "STATE": str(tmp_path / "child-state"),
    }
    procs = [
        subprocess.Popen([sys.executable, "-c", CHILD, f"w{p}", "25"], env=env) for p in range(8)
    ]
    assert [p.wait(180) for p in procs] == [0] * 8
    names = {e.name for e in pg.entries()}
    assert {f"w{p}-{i}" for p in range(8) for i in range(25)} <= names
    lines = pg.get("tally").body.split()
    assert sorted(lines) == sorted(f"w{p}-{i}" for p in range(8) for i in range(25))
    assert len(pg.history("tally")) == 200  # every replaced text kept
    assert len(pg.log()) == 1 + 400


KILLED = textwrap.dedent(
    """
    import os, time
    from pathlib import Path
    from memdir import memory as memfmt
    from memdir.config import Config
    from memdir_postgres.pg import PgStore
    from memdir_postgres.pgwrite import Writer
    from memdir.plan import Put, Remove
    config = Config(database_url=os.environ["URL"], store=os.environ["STORE"], embedder="none")
    store = PgStore(config, root=Path(os.environ["STATE"]))
    real = Writer.index
    def slow(self, *args, **kw):
        out = real(self, *args, **kw)
        Path(os.environ["MARK"]).write_text("inside")
        time.sleep(60)
        return out
    Writer.index = slow
    store.apply([
        Put(memfmt.Memory(name="half-a", type="project_fact", description="a")),
        Put(memfmt.Memory(name="half-b", type="project_fact", description="b")),
        Remove("keep-me"),
    ])
    """
)


@pytest.mark.slow
def test_a_writer_killed_mid_plan_leaves_nothing_half_applied(
    pg: PgStore, pg_config: Config, tmp_path: Path
) -> None:
    """A writer killed mid-plan leaves nothing half-applied."""
    pg.write("keep-me", type="project_fact", description="stays")
    mark = tmp_path / "mark"
    env = {
        **child_env(),
        "URL": str(pg_config.database_url),
        "STORE": pg_config.store,
        "STATE": str(tmp_path / "child-state"),
        "MARK": str(mark),
    }
    proc = subprocess.Popen([sys.executable, "-c", KILLED], env=env)
    assert until(mark.exists), "the writer never got inside its transaction"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    pg.refresh()
    assert {e.name for e in pg.entries()} == {"keep-me"}
    assert len(pg.log()) == 1 and pg.history("keep-me") == []
    # the killed writer's lock went with its connection: the next write goes through
    pg.write("after", type="project_fact", description="written after the kill")
    assert {e.name for e in pg.entries()} == {"after", "keep-me"}


def test_other_hosts_writes_are_heard_without_asking(
    pg_config: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other hosts' writes are heard without asking."""
    listener = PgStore(pg_config, root=tmp_path / "a", watch=True)
    writer = PgStore(pg_config, root=tmp_path / "b")
    try:
        assert listener.watching and len(listener) == 0
        # nothing heard: reads are answered from memory, not by asking the database
        calls = []
        real = listener.writing

        def counting():  # type: ignore[no-untyped-def]
            calls.append(1)
            return real()

        listener.entries()  # what happened before the LISTEN began is read once
        monkeypatch.setattr(listener, "writing", counting)
        for _ in range(5):
            listener.entries()
        assert calls == []
        writer.write("heard", type="project_fact", description="from another host")
        assert until(lambda: "heard" in {e.name for e in listener.entries()})
        writer.delete("heard")
        assert until(lambda: len(listener) == 0)
    finally:
        listener.close()
        writer.close()


def test_a_reader_without_a_listener_catches_up(pg_config: Config, tmp_path: Path) -> None:
    """A reader without a listener catches up."""
    reader = PgStore(pg_config, root=tmp_path / "a", watch=False)
    writer = PgStore(pg_config, root=tmp_path / "b")
    writer.write("one", type="project_fact", description="first")
    assert [e.name for e in reader.entries()] == ["one"]
    v = reader.version
    writer.write("one", type="project_fact", description="changed")
    assert reader.entries()[0].description == "changed" and reader.version > v
    assert not reader.watching
    lazy = PgStore(pg_config, root=tmp_path / "c", watch=None)
    lazy._opened -= 5  # still reading seconds after opening: a long-running process
    lazy.entries()
    assert lazy.watching  # from now on it hears other hosts' writes
    writer.write("two", type="project_fact", description="second")
    assert until(lambda: "two" in {e.name for e in lazy.entries()})
    lazy.close()
    reader.close()
    writer.close()


def test_files_round_trip_byte_for_byte(pg: PgStore, tmp_path: Path) -> None:
    """Files imported into a database and exported again are the same bytes."""
    src = MemoryStore(tmp_path / "src")
    fill(src)
    src.write("api-port", type="project_fact", description="The API listens on 9090")
    src.delete("deploy-friday")
    (tmp_path / "src" / "hand.md").write_text(  # a hand-written file, not canonical
        "---\nname: hand\ntype: reference\ndescription: written by hand\n---\n\nbody  \n"
    )
    src.refresh()
    import_store(tmp_path / "src", pg)
    assert {e.name for e in pg.entries()} == {e.name for e in src.entries()}
    assert [v.version for v in pg.history("api-port")] == [1]
    assert pg.retired() == ["deploy-friday"]
    out = tmp_path / "out"
    export(pg, out)
    for f in (tmp_path / "src").glob("*.md"):
        if f.name != "MEMORY.md":
            assert (out / f.name).read_bytes() == f.read_bytes(), f.name
    assert (out / "MEMORY.md").read_bytes() == (tmp_path / "src" / "MEMORY.md").read_bytes()
    back = MemoryStore(out)
    assert back.history("api-port") == src.history("api-port")
    assert back.version_text("deploy-friday", 1) == src.version_text("deploy-friday", 1)
    # nothing is written over: a second import names the first clash
    with pytest.raises(ConflictError, match="already has a memory"):
        import_store(tmp_path / "src", pg)
    with pytest.raises(ConflictError, match="already holds memory files"):
        export(pg, out)


def test_the_command_line_on_a_database(cli: CliFn, pg_config: Config, tmp_path: Path) -> None:
    """Every command works on a database store, and a bad store name, URL scheme or missing store is
    one line."""
    db = ["--db", str(pg_config.database_url), "--store", pg_config.store]
    r = cli(*db, "init")
    assert r.code == 0 and f"(store '{pg_config.store}')" in r.out
    assert cli(*db, "add", "port", "--type", "project_fact", "-d", "API on 8080").code == 0
    r = cli(*db, "init")  # again, on a store that has a memory now
    assert r.code == 0 and r.out.startswith("Memory store already exists") and "(1 memory)" in r.out
    assert (
        cli("add", "--scope", "user", "editor", "--type", "user_preference", "-d", "Vim").code == 0
    )
    listed = cli(*db, "list").out  # the database store by its name, beside the user's
    assert f"{pg_config.store}  port" in listed and "\nuser " in listed
    assert not any(line.startswith("project") for line in listed.splitlines())
    assert "port" in cli(*db, "list").out
    assert "API on 8080" in cli(*db, "search", "api port").out
    assert "- [port](port.md) — API on 8080" in cli(*db, "index", "--print").out
    assert cli(*db, "undo").code == 0 and "port" not in cli(*db, "list", "--scope", "project").out
    r = cli(*db, "sync")
    assert r.code == 1 and "PostgreSQL" in r.err and len(r.err.strip().splitlines()) == 1
    assert cli(*db, "restore", "port").code == 0
    r = cli(*db, "export", str(tmp_path / "copy"))
    assert r.code == 0 and (tmp_path / "copy" / "port.md").is_file()
    r = cli("--db", str(pg_config.database_url), "--store", "bad name!", "list")
    assert r.code == 1 and "store = 'bad name!' is not valid" in r.err
    r = cli("--db", "mysql://x", "list")
    assert r.code == 1 and "must start with postgresql://" in r.err
    # a store the database does not hold is an error for a read, as a missing folder is
    r = cli("--db", str(pg_config.database_url), "--store", "nosuch", "list")
    assert r.code == 1 and "nosuch" in r.err and len(r.err.strip().splitlines()) == 1


def test_a_cloned_projects_config_cannot_point_memories_at_a_database(
    tmp_path: Path, pg_config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cloned project's config cannot point memories at a database."""
    project = tmp_path / "repo"
    (project / ".memory").mkdir(parents=True)
    toml = project / ".memory" / "config.toml"
    toml.write_text(f'database_url = "{pg_config.database_url}"\nstore = "theirs"\n')
    monkeypatch.chdir(project)
    config = load_config({})
    assert config.database_url is None and config.store == "default"
    assert {"database_url", "store"} <= set(config.ignored)
    trust(toml)
    config = load_config({})
    assert config.database_url == pg_config.database_url and config.store == "theirs"


@pytest.mark.slow
def test_two_mcp_servers_and_api_processes_share_one_database(
    pg_config: Config, tmp_path: Path
) -> None:
    """Two HTTP MCP servers and two API processes write into one store at once; each server
    then recalls what the others wrote, and nothing is lost."""
    pytest.importorskip("mcp")
    import asyncio

    from mcp import Client

    from test_mcp import TOKEN, _start_http, authed, call

    env = {
        **child_env(),
        "MEMDIR_MCP_TOKEN": TOKEN,
        "MEMDIR_DATABASE_URL": str(pg_config.database_url),
        "MEMDIR_STORE": pg_config.store,
        "MEMDIR_EMBEDDER": "none",
    }
    PgStore(pg_config, root=tmp_path / "init").write(
        "tally", type="project_fact", description="one word per write"
    )
    servers = [_start_http(tmp_path / f"dir{i}", env=env) for i in range(2)]
    api_env = {
        **child_env(),
        "URL": str(pg_config.database_url),
        "STORE": pg_config.store,
        "STATE": str(tmp_path / "api-state"),
    }
    try:
        api = [
            subprocess.Popen([sys.executable, "-c", CHILD, f"api{p}", "15"], env=api_env)
            for p in range(2)
        ]

        async def remember(port: int, i: int) -> None:
            url = f"http://127.0.0.1:{port}/mcp"
            async with Client(authed(url), read_timeout_seconds=60) as client:
                for j in range(15):
                    out, err = await call(
                        client,
                        "remember",
                        name=f"s{i}-fact-{j}",
                        type="project_fact",
                        description=f"server {i} fact {j} about deploys",
                        body="x",
                    )
                    assert not err, out

        async def both() -> None:
            await asyncio.gather(*(remember(port, i) for i, (_, port) in enumerate(servers)))

        asyncio.run(both())
        assert [p.wait(120) for p in api] == [0, 0]

        async def listed(port: int) -> str:
            async with Client(authed(f"http://127.0.0.1:{port}/mcp")) as client:
                out, err = await call(client, "recall", message="api1-14 fact 14 from api1")
                assert not err
                cursor: dict[str, str] = {}
                while True:  # every page
                    page, err = await call(client, "list", **cursor)
                    assert not err
                    out += page
                    more = re.search(r'call list with cursor "(\d+)"', page)
                    if more is None:
                        return out
                    cursor = {"cursor": more.group(1)}

        for _, port in servers:  # each server sees every writer's memories
            seen = asyncio.run(listed(port))
            assert all(f"s{i}-fact-{j}" in seen for i in range(2) for j in range(15))
            assert "api1-14" in seen
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(10)
    check = PgStore(pg_config, root=tmp_path / "check")
    names = {e.name for e in check.entries()}
    assert len(names) == 1 + 30 + 30
    assert sorted(check.get("tally").body.split()) == sorted(
        f"api{p}-{i}" for p in range(2) for i in range(15)
    )
    check.close()


def test_extraction_consolidation_and_undo_on_a_database(pg: PgStore) -> None:
    """Extraction, consolidation and undo work on a database store."""
    from memdir.learn.consolidate import consolidate_memories
    from memdir.learn.extract import extract_memories
    from memdir_testing import FakeModel
    from test_consolidate import MERGE
    from test_consolidate import fill as fill_for_merge

    talk = [
        {"role": "user", "content": "Always use pnpm in this repo, never npm."},
        {"role": "assistant", "content": "Will do."},
    ]
    learned = {
        "memories": [
            {
                "action": "create",
                "name": "use-pnpm",
                "type": "project_fact",
                "description": "Use pnpm, never npm, in this repo",
                "body": "The user asked for pnpm.",
            }
        ]
    }
    result = extract_memories(pg, talk, FakeModel([learned]), source="extract")
    assert result.operation is not None and pg.get("use-pnpm").body == "The user asked for pnpm."
    fill_for_merge(pg)
    before = {m.name: m.body for m in pg.list()}
    consolidate_memories(pg, FakeModel([MERGE]))
    names = {e.name for e in pg.entries()}
    assert "prefer-pytest" in names and "old-deadline" not in names
    assert pg.history("old-deadline")[-1].reason == "retired: the release shipped"
    undo(pg)
    assert {m.name: m.body for m in pg.list()} == before


@pytest.mark.slow
def test_host_hooks_recall_and_learn_on_a_database(pg_config: Config, tmp_path: Path) -> None:
    """The host hooks recall from and learn into a database store."""
    from test_hooks import DATA, PNPM, _env, _wait_for, fake_host, hook

    project = tmp_path / "app"
    project.mkdir()
    bindir = tmp_path / "bin"
    fake_host(bindir, "claude", PNPM)
    env = _env(
        tmp_path,
        PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}",
        MEMDIR_DATABASE_URL=str(pg_config.database_url),
        MEMDIR_STORE=pg_config.store,
        MEMDIR_EMBEDDER="none",
    )
    event = {
        "session_id": "s1",
        "transcript_path": str(DATA / "claude_session.jsonl"),
        "cwd": str(project),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    r = hook(["learn", "--host", "claude-code"], event, tmp_path, env)
    assert r.returncode == 0 and r.stderr == ""
    store = PgStore(pg_config, root=tmp_path / "check", create=False)
    assert _wait_for(lambda: "use-pnpm" in {e.name for e in store.entries()})
    assert [op for op in store.log() if op.changes][-1].source == "extract:hook:claude-code"
    assert not (project / ".memory").exists()  # nothing learned into a folder
    prompt = {
        "session_id": "s2",
        "transcript_path": None,
        "cwd": str(project),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "npm or pnpm for this repo?",
    }
    r = hook(["prompt", "--host", "claude-code"], prompt, tmp_path, env)
    assert r.returncode == 0 and "The user asked to always use pnpm" in r.stdout
    store.close()


@pytest.mark.parametrize(
    ("url", "shown_as"),
    [
        ("postgresql://me:pa#ss/wo?rd@db.example:5432/app", "postgresql://me@db.example:5432/app"),
        ("postgresql://me:p@ss@h:1/d", "postgresql://me@h:1/d"),
        ("postgresql://[::1]:5432/db", "postgresql://[::1]:5432/db"),
        ("not a url", "the database URL (not of the form postgresql://…)"),
    ],
)
def test_a_database_url_is_shown_without_its_password_and_never_raises(
    url: str, shown_as: str
) -> None:
    """A password holding '#', '/', '?' or '@' is never read as the URL's structure."""
    from memdir_postgres.pgschema import shown

    assert shown(url) == shown_as


def test_a_lost_connection_is_one_line_and_the_next_call_reconnects(
    pg: PgStore, pg_config: Config
) -> None:
    """A server restart or an admin killing the session: the store's next call after a while
    reconnects by itself; a call that meets the broken connection gets one line, never the
    driver's exception, and the one after it works. A NUL is refused before the database."""
    from memdir_postgres.pgschema import connect

    pg.write("tabs", type="user_preference", description="Tabs", body="Tabs.")

    def kill_session() -> None:
        pid = pg._conn.info.backend_pid
        with connect(pg_config.database_url or "", autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    kill_session()
    pg._used -= 2.0  # a second or more unused, as between a server's restart and its next call
    assert pg.get("tabs").body == "Tabs."  # the default check: a new connection, no failure
    kill_session()
    pg.idle_check = 0.0  # as after a long idle time: looked at before it is used
    assert pg.get("tabs").body == "Tabs."
    kill_session()
    pg.idle_check = 3600.0
    with pytest.raises(MemdirError) as lost:
        pg.write("tabs", type="user_preference", description="Tabs", body="Tabs, 4.")
    assert "was lost" in str(lost.value) and "\n" not in str(lost.value)
    assert "psycopg" not in type(lost.value).__module__
    pg.write("tabs", type="user_preference", description="Tabs", body="Tabs, 4.")
    assert pg.get("tabs").body == "Tabs, 4."
    with pytest.raises(MemdirError, match="NUL character"):
        pg.write("zero-byte", type="project_fact", description="a\x00b", body="x")


@pytest.mark.slow
def test_the_throwaway_server_is_gone_after_kill(tmp_path: Path) -> None:
    """'python -m memdir_postgres.pglocal &' then 'kill': the server stops and its folder goes (no
    postgres left running under init)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memdir_postgres.pglocal"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
    )  # fmt: skip
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("postgresql://postgres:") and "@127.0.0.1:" in url  # a password
    port = url.rsplit(":", 1)[1].split("/")[0]

    def servers() -> list[str]:  # processes whose command line names the port
        out = []
        for cmd in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                args = cmd.read_bytes().split(b"\0")
            except OSError:
                continue
            if b"-p" in args and port.encode() in args and b"postgres" in b" ".join(args):
                out.append(cmd.parent.name)
        return out

    assert servers(), "the server runs"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 0
    assert servers() == []


def test_a_team_stores_memory_shows_its_writer_to_a_reader(
    pg_config: Config, tmp_path: Path
) -> None:
    """Alice writes through MCP into the team's database store; Bob, who may only read it,
    sees her as the writer in recall (never just "team"), and her rule neither stands as his
    own instruction nor is recalled as one."""
    from memdir.recall import render_block
    from memdir.scopes import Scope, Scopes
    from memdir.standing import standing

    team_config = dataclasses.replace(pg_config, store=pg_config.store + "-team")
    writer = PgStore(team_config, root=tmp_path / "alice")
    writer.write("review-rota", type="feedback", description="Alice reviews on Mondays",
                 body="Alice reviews the deploys on Mondays.", source="mcp:alice")  # fmt: skip
    writer.write("deploy-window", type="project_fact", description="Deploys run on Tuesdays",
                 body="The deploy window is Tuesday morning.", source="mcp:alice")  # fmt: skip
    bobs = MemoryStore(tmp_path / "bob" / ".memory")
    scopes = Scopes(Config(dir=bobs.root, embedder="none"), project=bobs, scopes=["project"])
    team = PgStore(team_config, create=False, root=tmp_path / "bob-team", read_only=True)
    scopes.scopes.append(Scope("team", team.root, False, team))
    assert scopes.origin("review-rota").label == "mcp:alice"
    assert 'from="mcp:alice"' in render_block(scopes, ["deploy-window"], 2000)
    assert render_block(scopes, ["review-rota"], 2000) == ""  # her rule: not one he acts on
    text = standing(scopes, 2000, 200, 25_000).text
    assert "Alice reviews the deploys" not in text and "came from elsewhere" in text


def test_a_failed_embedder_is_asked_again_after_a_while(
    pg_config: Config, tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    """A failure of the embedder leaves a database store's search BM25-only for a while (not
    tried again at once), then it is tried again: a long-running server is not BM25-only until
    restarted."""
    config = dataclasses.replace(
        pg_config, embedder="http", embed_url=llm_server.url + "/v1", embed_model="m"
    )
    store = PgStore(config, root=tmp_path / "pg")
    fill(store)  # the fake server has no embeddings to give: embedding fails
    store.search("PostgreSQL", 2)
    ranker = store.index.ranker()
    assert "BM25 alone" in store.index.describe() and ranker.dense_error is not None
    first = ranker._retry_at
    store.search("PostgreSQL", 2)  # within the delay: not tried again
    assert ranker._retry_at == first
    ranker._retry_at = 0.0  # the delay has passed
    store.search("PostgreSQL", 2)
    assert ranker._retry_at > first  # tried again (and failed again: BM25 for a while more)
