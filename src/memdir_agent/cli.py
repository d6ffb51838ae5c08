"""``memdir chat`` and ``run``: the coding agent.
This module does NOT define the agent (``loop``, ``repl``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memdir.cli.context import Ctx, build_model, emit_json, json_option, pass_ctx
from memdir.errors import LLMUnavailable, MemdirError

if TYPE_CHECKING:
    from memdir_agent.repl import Session


def check_endpoint(config: Any) -> None:
    """Fail at once, in one line, when a configured endpoint does not accept connections
    (before a chat or run starts, instead of one error per model call)."""
    import socket
    from urllib.parse import urlsplit

    from memdir.errors import LLMUnavailable

    if not config.base_url:
        return
    url = urlsplit(config.base_url)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "localhost", port), timeout=3).close()
    except OSError as exc:
        var = "ANTHROPIC_BASE_URL" if config.provider in (None, "anthropic") else "OPENAI_BASE_URL"
        raise LLMUnavailable(
            f"the model endpoint {config.base_url} is not reachable"
            f" ({exc.strerror or exc}) — start the server or fix {var}"
        ) from None


def new_session(
    c: Ctx, out: Any = None, *, yes: bool = False, interactive: bool = False
) -> Session:
    """An agent session in the current folder with the configured models. Commands and file
    changes need approval: asked on a terminal, else allowed by --yes or the 'allow' rules."""
    from memdir_agent.permissions import Gate
    from memdir_agent.repl import Session
    from memdir_agent.terminal import ask_on_terminal

    model = build_model(c, memory=False)
    memory_model = build_model(c, memory=True)
    check_endpoint(c.config)
    gate = Gate(rules=c.config.allow, yes=yes, ask=ask_on_terminal if interactive else None)
    kwargs = {"out": out} if out is not None else {}
    store = c.store
    from memdir import wings

    wings.event("started", c.config)  # (git: what teammates pushed, pulled)
    from memdir_agent.window import context_window

    session = Session(
        store, model, memory_model, Path.cwd(), gate=gate, scopes=c.scopes(), **kwargs
    )
    session.window = context_window(c.config, model.model)
    return session


@click.command("chat")
@click.option(
    "--yes", "-y", is_flag=True, help="Let the agent run commands and write files without asking."
)
@pass_ctx
def chat_cmd(c: Ctx, yes: bool) -> None:
    """Talk to the coding agent; it remembers across sessions. It asks before it runs a
    command or writes a file (once, always for this session, or no)."""
    from memdir_agent.repl import chat

    c.create_store = True
    chat(new_session(c, yes=yes, interactive=sys.stdin.isatty()))


@click.command("run", short_help="Run one agent turn for TASK.")
@click.argument("task", nargs=-1)
@click.option(
    "--yes",
    "-y",
    is_flag=True,
    help="Let the agent run commands and write files (else only what the"
    " 'allow' rules in config.toml permit).",
)
@json_option
@pass_ctx
def run_cmd(c: Ctx, task: tuple[str, ...], yes: bool, as_json: bool) -> None:
    """Run one agent turn for TASK (or the task piped on stdin) and print the reply."""
    import io

    words = " ".join(task).strip()
    if not words and not sys.stdin.isatty():
        words = sys.stdin.read().strip()
    if not words:
        raise click.UsageError("give the TASK as arguments or pipe it on stdin")
    task = (words,)
    c.create_store = True
    before = {op.id for op in c.store.log(50)}
    try:
        session = new_session(c, out=io.StringIO() if as_json else None, yes=yes)
    except LLMUnavailable as exc:  # the user's words are not lost with the model
        from memdir_agent.worker import keep_for_later

        keep_for_later(c.store, [{"role": "user", "content": words}])
        raise LLMUnavailable(
            f"{exc} (what you said is kept and learned from once the model answers again)"
        ) from None
    try:
        turn = session.turn(" ".join(task), stream=not as_json)
    finally:
        session.close()
    if as_json:
        changes = [op.to_dict() for op in c.store.log(50) if op.id not in before]
        emit_json(
            {
                "reply": turn.text,
                "recalled": turn.recalled,
                "interrupted": turn.interrupted,
                "transcript": session.messages,
                "memory_changes": changes,
                "events": [{"kind": k, "text": t} for k, t in session.events],
            }
        )
    elif turn.interrupted:
        raise MemdirError("the turn was interrupted")


COMMANDS = [chat_cmd, run_cmd]
