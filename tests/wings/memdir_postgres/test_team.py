"""A team's memory server against a real PostgreSQL with pgvector (embedded, on 127.0.0.1):
identities with their own tokens, read and write grants per store, row-level security in the
database, every write in its writer's name, and two people tried against each other as an
attacker would. Each test has a database of its own (identities are per database)."""

from __future__ import annotations

import asyncio
import hashlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memdir.config import Config
from memdir.errors import MemdirError, MemoryNotFound, ReadOnlyStore, StoreNotFound
from memdir.undo import undo
from memdir_postgres import pgteam
from memdir_postgres.pg import PgStore
from memdir_postgres.transfer import export

from conftest import CliFn, child_env

pytestmark = pytest.mark.postgres


@pytest.fixture
def team_url(pg_server: str, request: pytest.FixtureRequest) -> str:
    """A database of this test's own in the session's server."""
    from memdir_postgres.pgschema import connect

    name = "team_" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:12]
    conn = connect(pg_server, autocommit=True)
    conn.execute(f"DROP DATABASE IF EXISTS {name}")
    conn.execute(f"CREATE DATABASE {name}")
    conn.close()
    return re.sub(r"/[^/?]*(\?|$)", f"/{name}\\1", pg_server, count=1)


def owner(url: str, store: str, root: Path) -> PgStore:
    """The store as the tables' owner opens it (the memdir command): unrestricted."""
    return PgStore(Config(database_url=url, store=store, embedder="none"), root=root / store)


def as_person(url: str, name: str, store: str, root: Path, **kw: Any) -> PgStore:
    """The store opened on connections in identity ``name``'s session, as its server does."""
    from memdir_postgres.pgschema import connect

    conn = connect(url, autocommit=True)
    try:
        found = pgteam.who_by_name(conn, name)
        assert found is not None
        session = pgteam.session_sql(conn, found)
    finally:
        conn.close()
    config = Config(database_url=url, store=store, embedder="none")
    return PgStore(config, root=root / f"{name}-{store}", session=session, create=False, **kw)


def _team(url: str) -> dict[str, str]:
    """alice: team read, alice write; bob: team write, bob write. Their tokens."""
    from memdir_postgres.pgschema import connect, ensure_schema

    conn = connect(url, autocommit=True)
    ensure_schema(conn)
    pgteam.ensure(conn)
    _, alice = pgteam.add(conn, "alice", [("team", "read"), ("alice", "write")])
    _, bob = pgteam.add(conn, "bob", [("team", "write"), ("bob", "write")])
    conn.close()
    return {"alice": alice, "bob": bob}


def test_tokens_are_made_listed_and_revoked_from_the_command_line(
    cli: CliFn, team_url: str
) -> None:
    """tokens add shows the token once and makes the stores; list shows grants, never a
    token; bad input and a taken name are one line each; revoke stops the token."""
    db = ["--db", team_url]
    r = cli(*db, "tokens", "add", "alice", "--store", "team:read", "--store", "alice:write")
    assert r.code == 0, r.err
    token = r.out.strip().splitlines()[-1]
    assert token.startswith("mdt_") and len(token) > 40
    listed = cli(*db, "tokens", "list")
    assert "alice  alice:write, team:read" in listed.out and token not in listed.out
    assert cli(*db, "tokens", "list", "--json").out.count('"alice:write"') == 1
    for args, says in [
        (("tokens", "add", "alice", "--store", "x:write"), "exists"),
        (("tokens", "add", "carol", "--store", "team:admin"), "STORE:read or STORE:write"),
        (("tokens", "add", "Carol!", "--store", "team"), "is not valid"),
        (("tokens", "add", "carol"), "at least one store"),
        (("tokens", "revoke", "nobody"), "no identity named 'nobody'"),
    ]:
        r = cli(*db, *args)
        assert r.code != 0 and says in r.err and len(r.err.strip().splitlines()) == 1, r.err
    r = cli("tokens", "list")  # no database: identities need one
    assert r.code == 1 and "--db" in r.err and len(r.err.strip().splitlines()) == 1
    from memdir_postgres.pgschema import connect

    conn = connect(team_url, autocommit=True)
    assert pgteam.who(conn, token) is not None
    assert cli(*db, "tokens", "revoke", "alice").code == 0
    assert pgteam.who(conn, token) is None
    assert "revoked" in cli(*db, "tokens", "list").out
    # a revoked name may be given again, with a new token
    r = cli(*db, "tokens", "add", "alice", "--store", "alice:write")
    assert r.code == 0 and pgteam.who(conn, r.out.strip().splitlines()[-1]) is not None
    conn.close()


def test_the_database_holds_each_session_to_its_stores(team_url: str, tmp_path: Path) -> None:
    """Row-level security, as a bug in a tool would meet it: alice's session cannot open
    bob's store, sees nothing of it when pointed at its id, cannot write it, and cannot
    write the team store she may only read, even with the store's own guard switched off."""
    _team(team_url)
    bob = owner(team_url, "bob", tmp_path)
    bob.write("bob-secret", type="project_fact", description="Bob's salary is 100k")
    team = owner(team_url, "team", tmp_path)
    team.write("api-port", type="project_fact", description="The API listens on 8080")
    with pytest.raises(StoreNotFound):
        as_person(team_url, "alice", "bob", tmp_path)
    mine = as_person(team_url, "alice", "alice", tmp_path)
    mine.write("alice-note", type="project_fact", description="Alice reviews the deploys")
    assert [e.name for e in mine.entries()] == ["alice-note"]
    mine.sid = bob.sid  # a bug that points alice's store at bob's: the database says no
    mine._w.sid = bob.sid
    assert mine.list() == [] and mine.history("bob-secret") == [] and mine.retired() == []
    assert all("bob" not in op.summary for op in mine.log())
    with pytest.raises(StoreNotFound):  # bob's store row is not there for alice's session
        mine.search("salary bob", 5)
    with pytest.raises((MemoryNotFound, StoreNotFound)):
        mine.get("bob-secret")
    with pytest.raises((MemdirError, StoreNotFound)):  # no row of bob's store to count on
        mine.write("planted", type="project_fact", description="x")
    text = bob.text("bob-secret").replace("bob-secret", "planted")
    with pytest.raises(MemdirError):  # an import into bob's store: refused before anything
        mine.take([("planted", text, [])], source="import")
    with pytest.raises(MemdirError):  # undo of bob's last change: his log is not there
        undo(mine)
    with pytest.raises(MemdirError):  # a purge of bob's history: his store row is not there
        mine.purge("bob-secret")
    out = tmp_path / "exported"
    with pytest.raises(MemdirError):  # an export through alice's session: nothing comes out
        export(mine, out)
    assert not [p for p in out.glob("*.md") if p.name != "MEMORY.md"]
    assert "planted" not in bob and len(bob) == 1 and len(bob.history("bob-secret")) == 0
    mine.close()
    theirs = as_person(team_url, "alice", "team", tmp_path, read_only=True)
    assert [e.name for e in theirs.entries()] == ["api-port"]
    with pytest.raises(ReadOnlyStore):
        theirs.write("api-port", type="project_fact", description="The API is on 9090")
    theirs.read_only = False  # the store's own guard gone: the database still refuses
    with pytest.raises(StoreNotFound, match="not there for this identity"):
        theirs.write("api-port", type="project_fact", description="The API is on 9090")
    assert team.get("api-port").description == "The API listens on 8080"
    theirs.close()
    # the owner (the memdir command, a one-person server) is not restricted
    assert owner(team_url, "bob", tmp_path).get("bob-secret").description.startswith("Bob")


def _server(url: str, root: Path, *args: str) -> tuple[subprocess.Popen[bytes], int]:
    from test_mcp import _start_http

    env = {**child_env(), "MEMDIR_DATABASE_URL": url, "MEMDIR_EMBEDDER": "none"}
    env.pop("MEMDIR_MCP_TOKEN", None)
    return _start_http(root, *args, env=env)


@pytest.mark.slow
def test_two_people_on_one_team_server_see_only_their_own(
    cli: CliFn, team_url: str, tmp_path: Path
) -> None:
    """One server, two identities: every tool with the other's names, paths, version
    references and search terms finds nothing of the other's and says so in one line;
    writes land in the writer's own store, in their name; the team store is read-only for
    alice and writable for bob; concurrent writes of both lose nothing; a wrong, missing or
    revoked token is refused."""
    from mcp import Client

    from test_mcp import _post, authed, call

    tokens = _team(team_url)
    team, bob = owner(team_url, "team", tmp_path), owner(team_url, "bob", tmp_path)
    team.write("api-port", type="project_fact", description="The API listens on 8080")
    bob.write("bob-salary", type="project_fact", description="Bob's salary", body="100k a year")
    bob.write("bob-salary", type="project_fact", description="Bob's salary", body="110k a year")
    proc, port = _server(team_url, tmp_path / "srv")
    url = f"http://127.0.0.1:{port}/mcp"

    async def as_alice() -> None:
        async with Client(authed(url, tokens["alice"])) as client:
            out, err = await call(client, "search", query="salary year bob")
            assert not err and "bob-salary" not in out and "110k" not in out
            out, err = await call(client, "recall", message="what is bob's salary per year?")
            assert not err and "110k" not in out and "bob-salary" not in out
            listed, err = await call(client, "list")
            assert not err and "api-port (project_fact, team)" in listed and "bob" not in listed
            for tool, args in [
                ("read", {"name": "bob-salary"}),
                ("read", {"name": "bob:bob-salary"}),
                ("history", {"name": "bob-salary"}),
                ("history", {"name": "bob:bob-salary"}),
                ("restore", {"name": "bob-salary", "version": 1}),
                ("restore", {"name": "bob:bob-salary", "version": 1}),
                ("forget", {"name": "bob:bob-salary"}),
                ("edit", {"name": "bob:bob-salary", "old": "110k", "new": "1"}),
                ("remember", {"description": "x", "scope": "bob", "name": "bob-salary"}),
                ("remember", {"description": "x", "scope": "team", "name": "planted"}),
                ("edit", {"name": "team:api-port", "old": "8080", "new": "9090"}),
                ("forget", {"name": "team:api-port"}),
            ]:
                out, err = await call(client, tool, **args)
                assert err and "110k" not in out and "100k" not in out, (tool, args, out)
                assert len(out.strip().splitlines()) == 1, (tool, out)
            out, err = await call(client, "edit", name="team:api-port", old="8080", new="9")
            assert err and "alice may only read" in out
            out, err = await call(
                client, "remember", name="review-rota", type="project_fact",
                description="Alice reviews the deploys on Mondays",
            )  # fmt: skip
            assert not err and "Saved memory review-rota" in out
            out, err = await call(client, "read", name="review-rota")
            assert not err and "(from: mcp:alice" in out
            out, err = await call(client, "recall", message="who reviews the deploys on Mondays?")
            assert 'from="mcp:alice"' in out
            index = await client.read_resource("memory://index")
            shown = str(index)
            assert "api-port" in shown and "review-rota" in shown and "bob-salary" not in shown

    async def as_bob() -> None:
        async with Client(authed(url, tokens["bob"])) as client:
            out, err = await call(client, "search", query="who reviews the deploys")
            assert not err and "review-rota" not in out
            out, err = await call(client, "edit", name="team:api-port", old="8080", new="9090")
            assert not err, out

    async def both_write() -> None:
        async def write(who: str) -> None:
            async with Client(authed(url, tokens[who])) as client:
                for j in range(15):
                    out, err = await call(
                        client, "remember", name=f"{who}-fact-{j}", type="project_fact",
                        description=f"{who} fact {j}",
                    )  # fmt: skip
                    assert not err, out

        await asyncio.gather(write("alice"), write("bob"))

    try:
        asyncio.run(as_alice())
        asyncio.run(as_bob())
        asyncio.run(both_write())
        assert _post(port, {}) == 401
        assert _post(port, {"Authorization": "Bearer mdt_not-a-token-anyone-has"}) == 401
        assert _post(port, {"Authorization": f"Bearer {tokens['alice']}"}) == 200
        assert cli("--db", team_url, "tokens", "revoke", "alice").code == 0
        import time

        time.sleep(2.5)  # the server asks the database again after its short cache
        assert _post(port, {"Authorization": f"Bearer {tokens['alice']}"}) == 401
    finally:
        proc.terminate()
        proc.wait(10)
    alice = owner(team_url, "alice", tmp_path)
    assert {e.name for e in alice.entries()} == {"review-rota"} | {
        f"alice-fact-{j}" for j in range(15)
    }
    assert {e.name for e in bob.entries()} == {"bob-salary"} | {f"bob-fact-{j}" for j in range(15)}
    assert bob.get("bob-salary").body == "110k a year" and len(bob.history("bob-salary")) == 1
    assert team.get("api-port").description == "The API listens on 9090"
    assert alice.origin("review-rota").label == "mcp:alice"
    assert team.origin("api-port").label == "mcp:bob"
    assert {op.source for op in alice.log()} == {"mcp:alice"}
    log = cli("--db", team_url, "--store", "team", "log")
    assert "mcp:bob" in log.out
    history = cli("--db", team_url, "--store", "team", "history", "api-port")
    assert "(by mcp:bob)" in history.out


@pytest.mark.slow
def test_a_shared_token_is_refused_where_people_have_their_own(
    team_url: str, tmp_path: Path
) -> None:
    """A server started with --token on a database that has identities stops at once with
    one line: a shared token would let everyone be everyone."""
    from test_mcp import _free_port

    _team(team_url)
    r = subprocess.run(
        [sys.executable, "-m", "memdir", "--db", team_url, "mcp", "--http", "--port",
         str(_free_port()),
         "--token", "x" * 32],
        env={**child_env(), "MEMDIR_EMBEDDER": "none"},
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert r.returncode != 0 and "each client sends its own token" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_grants_decide_the_scopes_each_person_sees(team_url: str, tmp_path: Path) -> None:
    """The tools of a person: the home store is the project scope, the others are scopes
    named after their store, read-only where only read is granted; an agent that may only
    read cannot save anything."""
    from memdir_postgres.pgschema import connect
    from memdir_postgres.team import Team

    _team(team_url)
    conn = connect(team_url, autocommit=True)
    pgteam.add(conn, "ci-bot", [("team", "read")])
    conn.close()
    owner(team_url, "team", tmp_path).write(
        "api-port", type="project_fact", description="The API listens on 8080"
    )
    config = Config(database_url=team_url, embedder="none", user_dir=tmp_path / "nouser")
    team = Team(config, root=tmp_path / "state")
    try:
        alice = team.memory_for(team.who(_team_tokens_of(team_url, "alice")) or _fail())
        scopes = alice.scopes()
        assert [(s.name, s.writable) for s in scopes.scopes] == [("project", True), ("team", False)]
        assert "Saved memory note" in alice.remember(description="a note", name="note")
        assert alice.stores["alice"].get("note").description == "a note"
        bot = team.memory_for(pgteam.Identity("ci-bot", (("team", "read"),)))
        assert "api-port (project_fact, team)" in bot.list_()
        with pytest.raises(Exception, match="may only read"):
            bot.remember(description="a bot's note", name="bot-note")
    finally:
        team.close()


def _fail() -> Any:
    raise AssertionError("the token names nobody")


def _team_tokens_of(url: str, name: str) -> str:
    """A fresh token for ``name`` (revoked and given again: tokens are shown once)."""
    from memdir_postgres.pgschema import connect

    conn = connect(url, autocommit=True)
    found = pgteam.who_by_name(conn, name)
    assert found is not None
    pgteam.revoke(conn, name)
    _, token = pgteam.add(conn, name, list(found.grants))
    conn.close()
    return token
