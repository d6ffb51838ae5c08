"""``memdir ui``: serve the local web app on 127.0.0.1 and open it in the browser.

This module does NOT define pages (``ui.app`` does).
"""

from __future__ import annotations

import shutil
import signal
import socket
import sys
import tempfile

import click

from memdir.cli.context import Ctx, fail, pass_ctx
from memdir.config import load_config


def _free_port(wanted: int | None) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", wanted or 0))
        except OSError:
            fail(f"port {wanted} is in use on 127.0.0.1 — pass another with --port")
        port: int = s.getsockname()[1]
        return port


@click.command("ui", short_help="See and steer memories in the browser.")
@click.option(
    "--port", type=click.IntRange(1, 65535), help="Port on 127.0.0.1 (default: a free one)."
)
@click.option("--no-open", is_flag=True, help="Print the link; do not open a browser.")
@pass_ctx
def ui_command(c: Ctx, port: int | None, no_open: bool) -> None:
    """A local web app over every store in scope: memories with search and filters, each
    memory's versions and diffs, edit/pin/move/forget/restore, the review queue, activity
    and the recall log. Only this machine can reach it, with the one-time link it prints."""
    try:
        import uvicorn

        from memdir_ui.access import Access
        from memdir_ui.app import build_app
    except ImportError as exc:
        missing = exc.name or str(exc)
        fail(f"memdir ui needs the ui extra ({missing} is missing) — pip install 'memdir[ui]'")
    scopes = c.scopes(require=False)
    if not scopes.stores():
        fail("no memory store here or in your user folder yet — 'memdir init' creates one")
    chosen = _free_port(port)
    access = Access(chosen)
    app = build_app(scopes, access, lambda: load_config(c.overrides), c.also)
    link = access.link
    click.echo(f"memdir ui: {link}  (one-time link; Ctrl-C stops)", err=True)
    # uvicorn stops on SIGTERM, then raises it again with the handler it found: this one ends
    # the process through the clean-up below instead of at once (set before the page exists)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    folder = None if no_open else tempfile.mkdtemp(prefix="memdir-ui-")  # 0700
    try:
        if folder is not None:
            _open_privately(link, folder)
        sys.stdout.flush()
        uvicorn.run(app, host="127.0.0.1", port=chosen, log_level="warning")
    finally:  # stopped by Ctrl-C or SIGTERM: the page that held the link goes too
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _open_privately(link: str, folder: str) -> None:
    """Open ``link`` in the browser without putting its token on a command line other users
    can read (``/proc/*/cmdline``): the browser gets an owner-only file in ``folder`` (removed
    when the server stops) that sends it on."""
    import html
    import os
    import webbrowser

    page = os.path.join(folder, "open.html")
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        target = html.escape(link, quote=True)
        fh.write(
            f'<!doctype html><meta http-equiv="refresh" content="0;url={target}">'
            f'<title>memdir</title><a href="{target}">Open memdir</a>\n'
        )
    webbrowser.open("file://" + page)


COMMANDS = (ui_command,)
