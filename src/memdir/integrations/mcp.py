"""``memdir mcp``: the memory as a Model Context Protocol server, for any agent host.

Tools for recall, search, listing (paged within a token budget), reading, remembering, exact
edits, forgetting, history and restore; the index and each memory as resources; one prompt.
The tools are methods of ``mcp_memory.MemoryServer``, registered here from ``TOOLS`` with the
descriptions a host's model reads. It logs to stderr only, since on stdio the standard output
is the protocol. Over HTTP (``memdir mcp --http``) the ``memdir_http`` wing serves these same
tools. Built on the official ``mcp`` SDK (``memdir[mcp]``).
This module does NOT decide what to remember: the host's model does, through the tools.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, ToolAnnotations
from pydantic import ValidationError

from ..config import Config
from .mcp_memory import MemoryServer
from .mcpstart import INSTRUCTIONS
from .mcpstart import version as _version

READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
DESTROY = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)


class Tool(NamedTuple):
    """One tool: the method of ``MemoryServer`` that runs it, and what the host is told."""

    method: str
    name: str
    annotations: ToolAnnotations
    description: str


TOOLS = [
    Tool(
        "recall",
        "recall",
        READ,
        "Recall the saved memories relevant to a message: returns the <relevant_memories>"
        " block to read before answering (empty when nothing applies). Pass the user's latest"
        " message as 'message' (or 'query'/'text'); optionally 'recent', earlier turns, and"
        " 'as_of' (a date like 2026-11-02, or 'last week') for what the memories said then,"
        " from their history.",
    ),
    Tool(
        "search",
        "search",
        READ,
        "Full-text search over memory names, descriptions and bodies. 'query' (or 'q'/"
        "'text'); 'k' results (default 5). Returns name, type, score and description.",
    ),
    Tool(
        "list_",
        "list",
        READ,
        "List memories (name, type, description), a page at a time within a token budget."
        " Optional 'type' filter; pass the returned 'cursor' to get the next page.",
    ),
    Tool(
        "read",
        "read",
        READ,
        "Read one memory whole (frontmatter and body) by 'name' (or 'id'/'memory').",
    ),
    Tool(
        "remember",
        "remember",
        WRITE,
        "Save a memory, or update the one with this name. 'type' is one of the store's types"
        " ({types}; guessed from the text when missing: a preference of the person goes to"
        " their own store, anything else to the project's); 'description' is one line saying"
        " when the memory matters; 'body' holds the details. 'name' is optional"
        " (lowercase-hyphenated; made from the description when missing). Credentials are"
        " refused: leave them out.",
    ),
    Tool(
        "edit",
        "edit",
        WRITE,
        "Change part of a memory: replace the exact text 'old' with 'new' in its body (or its"
        " description). Refused when 'old' is missing or appears more than once. Under"
        ' review = "ask" (as for remember, forget and restore) it waits for the user\'s review.',
    ),
    Tool(
        "forget",
        "forget",
        DESTROY,
        "Forget a memory by 'name' (or 'id'/'memory'), saying why in 'reason'. It moves to"
        " history: restore brings it back.",
    ),
    Tool(
        "history",
        "history",
        READ,
        "Earlier versions of a memory (also of a forgotten one): version, time, action, why.",
    ),
    Tool(
        "restore",
        "restore",
        WRITE,
        "Bring back an earlier version of a memory ('version', default the latest); the"
        " current one is kept in history too.",
    ),
]


class Server(MCPServer):
    """The SDK's server, with one rule for bad input: a tool's invalid arguments are a tool
    error of one line saying what the tool takes (not the validator's text and URL), and a
    prompt called without its argument is invalid params (-32602)."""

    memory: MemoryServer | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if self.memory is not None:  # who writes: the host that connected (provenance)
            self.memory.client = _client_name(context) or self.memory.client
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(self._invalid(name, exc.__cause__)) from None
            raise

    def _invalid(self, name: str, err: ValidationError) -> str:
        what = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg'].lower()}"
            for e in err.errors()[:3]
        )
        tool = self._tool_manager.get_tool(name)
        props = (tool.parameters.get("properties", {}) if tool is not None else {}) or {}
        takes = ", ".join(f"{p} ({_kind(spec)})" for p, spec in props.items())
        return f"invalid arguments to {name}: {what} — it takes {takes or 'no arguments'}"

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Any = None
    ) -> Any:
        prompt = self._prompt_manager.get_prompt(name)
        if prompt is not None:
            missing = [a.name for a in prompt.arguments or [] if a.required]
            missing = [a for a in missing if a not in (arguments or {})]
            if missing:
                raise MCPError(
                    code=INVALID_PARAMS,
                    message=f"prompt {name!r} needs the argument {missing[0]!r}",
                )
        return await super().get_prompt(name, arguments, context)


def _client_name(context: Any) -> str:
    """The connected host's name from its initialize request ('claude-code', 'codex'…)."""
    try:
        params = context.request_context.session.client_params
        return str(params.client_info.name) if params is not None else ""
    except (AttributeError, ValueError):
        return ""


def _kind(spec: dict[str, Any]) -> str:
    """A parameter's type as a person says it (from its JSON schema)."""
    types = [t.get("type") for t in spec.get("anyOf", [spec]) if t.get("type") != "null"]
    names = {"string": "text", "integer": "whole number", "array": "list", "boolean": "true/false"}
    return " or ".join(names.get(str(t), str(t)) for t in types) or "any"


Bind = Callable[[MemoryServer, str], Callable[..., Any]]


def build_server(
    config: Config, kind: Callable[..., Server] = Server, bind: Bind = getattr
) -> Server:
    """The MCP server for the store ``config`` names: a ``kind`` of server whose tools and
    resources are ``bind(memory, method)`` (the ``MemoryServer``'s own methods; a team's
    server binds each to the person a request comes from). Tools answer plain text (no output
    schema: hosts pass the text to the model as written, not as escaped JSON)."""
    mem = MemoryServer(config)
    server = kind("memdir", version=_version(), instructions=INSTRUCTIONS)
    server.memory = mem

    def bound(method: str) -> Callable[..., Any]:
        return bind(mem, method)

    for tool in TOOLS:
        description = tool.description.format(types=", ".join(config.types))
        server.tool(
            name=tool.name,
            annotations=tool.annotations,
            description=description,
            structured_output=False,
        )(bound(tool.method))
    server.resource(
        "memory://index",
        name="index",
        mime_type="text/markdown",
        description="The memory index of every scope: one line per memory, by type (what is"
        " held for review left out).",
    )(bound("index"))
    server.resource(
        "memory://standing",
        name="standing",
        mime_type="text/markdown",
        description="The user's standing preferences, rules and pinned memories (follow them"
        " in every session), then the memory index.",
    )(bound("standing"))
    server.resource(
        "memory://{name}",
        name="memory",
        mime_type="text/markdown",
        description="One memory file, frontmatter and body.",
    )(bound("memory_file"))
    server.prompt(name="remember", description="Save something to long-term memory.")(
        remember_prompt
    )
    return server


def remember_prompt(text: str) -> str:
    return (
        "Save the following to long-term memory with the remember tool: choose the type,"
        " write a one-line description saying when it matters, and put the details in the"
        f" body. Leave out any credential.\n\n{text}"
    )


def log_to_stderr() -> None:
    """The server's log goes to stderr (on stdio the standard output is the protocol)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("memdir mcp: %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)


def serve(config: Config) -> None:
    """Run the server on stdio."""
    log_to_stderr()
    build_server(config).run("stdio")


__all__ = ["Server", "build_server", "log_to_stderr", "serve"]
