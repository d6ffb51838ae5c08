"""``memdir hook``, ``memdir hooks`` and ``memdir mcp``: what agent hosts run, installing it
for them, and the memory served to them over MCP.

A hook command never fails its host: every error becomes one line on stderr (and in the hook
log) and exit code 0. This module does NOT contain hook logic (``integrations.hooks`` does).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import click

from ..disk.layout import NESTED_ENV
from ..errors import MemdirError
from .context import Ctx, F, pass_ctx

HOST_CHOICE = click.Choice(["claude-code", "codex"])


@click.command("hook", short_help="Run as a Claude Code or Codex hook.")
@click.argument("kind", type=click.Choice(["start", "prompt", "tool", "learn"]))
@click.option(
    "--host",
    help="The host that runs the hook: claude-code or codex (another name is used as no host).",
)
@pass_ctx
def hook(c: Ctx, kind: str, host: str | None) -> None:
    """Run as a host hook: KIND is start (SessionStart), prompt (UserPromptSubmit), tool
    (PreToolUse) or learn (Stop, SessionEnd, PreCompact). Reads the event JSON on stdin;
    always exits 0."""
    import os

    if os.environ.get(NESTED_ENV):  # a session memdir started as its memory model
        return
    from ..integrations import hooks

    host = host if host in HOST_CHOICE.choices else None  # never exit 2: that blocks the prompt
    try:
        out, err = hooks.run(kind, host, sys.stdin.read())
        if out:
            click.echo(out)
        if err:
            click.echo(err, err=True)
    except Exception as exc:  # a hook must never break its host: report and go on
        click.echo(f"memdir hook {kind}: {exc}".splitlines()[0], err=True)
    finally:
        if kind in ("prompt", "start", "tool"):
            _leave()  # a search or model call still at work must not keep the host waiting


def _leave() -> None:
    """Exit 0 at once when a thread is still at work (a late model call, an embedder): letting
    the interpreter wait for it, or tear a native library down under it, would keep the host
    waiting or abort the process."""
    import os
    import threading

    if threading.active_count() > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


@click.group("hooks")
def hooks_group() -> None:
    """Install memdir's hooks into Claude Code or Codex."""


def _where(user: bool) -> str:
    return "user" if user else "project"


def _scope_option(what: str) -> Callable[[F], F]:
    """``--scope project|user``; the flags ``--project`` and ``--user`` of earlier versions
    are still taken (hidden), so scripts written for them keep working."""

    def legacy(ctx: click.Context, param: click.Parameter, value: bool) -> None:
        if value:
            ctx.meta["memdir_scope"] = param.name

    def apply(f: F) -> F:
        for flag in ("--user", "--project"):
            f = click.option(flag, is_flag=True, hidden=True, expose_value=False, callback=legacy)(
                f
            )
        return click.option(
            "--scope",
            type=click.Choice(["project", "user"]),
            default="project",
            show_default=True,
            callback=lambda ctx, _p, v: ctx.meta.get("memdir_scope", v),
            help=f"{what}: this project, or the user's own"
            " settings (every project: ~/.claude, ~/.codex).",
        )(f)

    return apply


@hooks_group.command("install", short_help="Add memdir's hooks to HOST's settings.")
@click.argument("host", type=HOST_CHOICE)
@_scope_option("Where")
def install(host: str, scope: str) -> None:
    """Add recall (UserPromptSubmit) and learning (Stop…) hooks to HOST's settings."""
    from ..integrations import hooks

    user = scope == "user"
    path, diff = hooks.install(host, user=user, project=Path.cwd())
    click.echo(diff.rstrip() or f"memdir's hooks are already in {path}; nothing changed.")
    if diff:
        click.echo(f"Installed memdir's hooks for {host} ({_where(user)}) in {path}.")
    if host == "codex":
        click.echo(
            "Codex runs a new or changed hook only once you trust it, and skips it silently"
            " until then: start 'codex', type /hooks and trust memdir's entries."
        )
        if not user:
            click.echo(
                "A project's .codex/hooks.json loads only in a project Codex trusts: accept"
                " the folder when Codex asks, or add [projects.'"
                f'{Path.cwd()}\'] trust_level = "trusted" to ~/.codex/config.toml.'
            )


@hooks_group.command("uninstall")
@click.argument("host", type=HOST_CHOICE)
@_scope_option("From where")
def uninstall(host: str, scope: str) -> None:
    """Take exactly memdir's entries out of HOST's settings."""
    from ..integrations import hooks

    user = scope == "user"
    path, diff = hooks.uninstall(host, user=user, project=Path.cwd())
    click.echo(diff.rstrip() or f"No memdir hooks in {path}; nothing changed.")


@click.command("mcp", short_help="Serve the memory to an agent host over MCP.")
@click.option("--http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
@click.option("--host", help="Address to listen on with --http (default 127.0.0.1 only).")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8765,
    show_default=True,
    help="Port for --http.",
)
@click.option(
    "--token",
    envvar="MEMDIR_MCP_TOKEN",
    show_envvar=True,
    help="The bearer token --http requires (default: one generated and kept"
    " owner-only; required beyond loopback).",
)
@click.option(
    "--allow-origin",
    "origins",
    multiple=True,
    help="A browser Origin allowed to call --http, exactly (repeatable).",
)
@click.option(
    "--allow-host",
    "hosts",
    multiple=True,
    help="Another Host name clients use to reach --http (repeatable).",
)
@pass_ctx
def mcp_cmd(
    c: Ctx,
    http: bool,
    host: str | None,
    port: int,
    token: str | None,
    origins: tuple[str, ...],
    hosts: tuple[str, ...],
) -> None:
    """Serve the memory to an agent host over MCP (stdio, or HTTP at /mcp, which needs a
    bearer token)."""
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        raise MemdirError(
            "the MCP server needs the mcp package — install memdir[mcp] (pip install 'memdir[mcp]')"
        )
    if http:
        from .. import wings
        from ..gate.trust import config_home

        wings.need("memdir.serve", "http")(
            c.config,
            host=host or "127.0.0.1",
            port=port,
            token=token,
            origins=origins,
            hosts=hosts,
            home=config_home(os.environ),
        )
        return
    from ..integrations.mcpstart import initialize_first

    # on stdio the host's initialize is answered before the SDK loads (hosts wait seconds)
    with initialize_first():
        from ..integrations.mcp import serve as serve_stdio

        serve_stdio(c.config)


COMMANDS = [hook, hooks_group, mcp_cmd]
