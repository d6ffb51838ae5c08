"""``memdir mcp --http``: the core's MCP server on streamable HTTP at ``host:port`` (``/mcp``).

Every request needs the bearer token (``token``, else one generated and kept in ``home``), a
Host that names this server and, from a browser, an Origin listed in ``origins`` (``guard``).
Over a database with identities (a team's server, ``memdir tokens``), each request is someone:
its token names them and its tools are theirs (``TeamServer``).
This module does NOT define the tools (``memdir.integrations.mcp``).
"""

from __future__ import annotations

import contextvars
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from mcp.server.mcpserver.exceptions import ToolError

from memdir import wings
from memdir.config import Config
from memdir.integrations.mcp import Server, build_server, log_to_stderr
from memdir.integrations.mcp_memory import MemoryServer
from memdir_http.guard import IDENTITY, Guard, allowed_hosts, resolve_token


class Team(Protocol):
    """The identities a team server's database holds (the PostgreSQL wing's ``Team``): how many
    are active, whose a bearer token is, and each one's tools."""

    def active(self) -> int: ...
    def who(self, token: str) -> Any: ...
    def memory_for(self, identity: Any) -> MemoryServer: ...


# the tools of the person a team server's request comes from (``Team.memory_for``)
CURRENT: contextvars.ContextVar[MemoryServer] = contextvars.ContextVar("memdir_person")


class TeamServer(Server):
    """A team's server: each tool call and resource read runs on the tools of the person whose
    token the request carries (the guard named them)."""

    def __init__(self, *args: Any, team: Team, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.team = team

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        person = CURRENT.set(self._person(context))
        try:
            return await super().call_tool(name, arguments, context)
        finally:
            CURRENT.reset(person)

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        person = CURRENT.set(self._person(context))
        try:
            return await super().read_resource(uri, context)
        finally:
            CURRENT.reset(person)

    def _person(self, context: Any) -> MemoryServer:
        try:
            identity = context.request_context.request.scope.get("state", {}).get(IDENTITY)
        except AttributeError:
            identity = None
        if identity is None:  # the guard refuses such a request: never reached over HTTP
            raise ToolError("this request carries no identity — send your own token")
        return self.team.memory_for(identity)


def each_person(memory: MemoryServer, method: str) -> Callable[..., Any]:
    """``memory``'s ``method`` (for its signature) run on the tools of the request's person."""

    @functools.wraps(getattr(memory, method))
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(CURRENT.get(), method)(*args, **kwargs)

    return call


def serve(
    config: Config,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    origins: tuple[str, ...] = (),
    hosts: tuple[str, ...] = (),
    home: Path,
) -> None:
    """Serve until stopped; say on stderr where, and which token a client sends."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    log_to_stderr()
    team = _team(config, token)
    if team is None:
        secret, kept, made = resolve_token(token, host, home)
        server = build_server(config)
    else:
        secret, kept, made = "", None, False
        server = build_server(config, functools.partial(TeamServer, team=team), each_person)
    names = allowed_hosts(host, port, hosts)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted(names),
        allowed_origins=list(origins),
    )
    app = server.streamable_http_app(transport_security=security, host=host)
    shown = f"[{host}]" if ":" in host else host
    print(f"memdir mcp: serving http://{shown}:{port}/mcp", file=sys.stderr)
    if made:
        print(
            f"memdir mcp: new access token (kept in {kept}): {secret}\n  send it as"
            " 'Authorization: Bearer <token>'",
            file=sys.stderr,
        )
    elif kept is not None:
        print(f"memdir mcp: access token in {kept}", file=sys.stderr)
    if team is not None:
        print(
            f"memdir mcp: {team.active()} identities; each client sends its own token"
            " ('memdir tokens list')",
            file=sys.stderr,
        )
    who = None if team is None else team.who
    guarded = Guard(app, secret, names, origins, who=who)
    uvicorn.Server(uvicorn.Config(guarded, host=host, port=port, log_level="warning")).run()


def _team(config: Config, token: str | None) -> Team | None:
    """The team whose identities this server serves (a database with identities: the wing
    that serves its backend says, ``team``), else None."""
    if not config.database_url:
        return None
    found = [team for team in wings.event("team", config, token) if team is not None]
    return found[0] if found else None
