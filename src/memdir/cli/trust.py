"""``memdir trust``: let a repository's config.toml decide what only the user's may.

A project's settings that send data or keys somewhere, or grant the agent permissions, are
ignored until the user trusts that file's content (see ``trust``). This command grants,
lists and revokes that trust. It does NOT change the file.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..config import SENSITIVE, read_toml
from ..gate.safetext import for_terminal
from ..gate.trust import TrustList, accept_pulled, config_home, digest
from .context import Ctx, emit_json, fail, json_option, pass_ctx


def _config_file(c: Ctx, path: Path | None) -> Path:
    """The config.toml that PATH names: the file, a store folder, or a project folder."""
    if path is None:
        path = c.config.dir
    for candidate in (path, path / "config.toml", path / ".memory" / "config.toml"):
        if candidate.is_file():
            return candidate.absolute()
    fail(f"no config.toml at {path} — give a project folder, its .memory folder or the file")


@click.command("trust", short_help="Trust a repository's config.toml (keys, endpoints, rules).")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--list", "list_", is_flag=True, help="List the trusted files.")
@click.option("--revoke", is_flag=True, help="Stop trusting the file.")
@json_option
@pass_ctx
def trust_cmd(c: Ctx, path: Path | None, list_: bool, revoke: bool, as_json: bool) -> None:
    """Trust the project's config.toml (or PATH's), so its provider, endpoints, embedder,
    user store, outside read-only stores and approval rules apply. Trust is kept for this
    exact content: after an edit, look again and trust it again."""
    if not (list_ or revoke):
        c.users_decision("trusting a project's settings")
    trusted = TrustList(config_home(os.environ))
    if list_:
        grants = trusted.grants()
        if as_json:
            emit_json([g.__dict__ | {"current": _current(Path(g.path), g.sha256)} for g in grants])
            return
        for g in grants:
            now = "" if _current(Path(g.path), g.sha256) else "  (changed since: not trusted)"
            click.echo(f"{for_terminal(g.path)}  {g.when}{now}")
        if not grants:
            click.echo("No repository is trusted.")
        return
    file = _config_file(c, path)
    if revoke:
        if not trusted.revoke(file):
            fail(f"{file} was not trusted — 'memdir trust --list' shows what is")
        click.echo(f"No longer trusted: {file}")
        return
    sensitive = sorted(k for k in read_toml(file) if k in SENSITIVE)
    trusted.trust(file, digest(file))
    accept_pulled(file)  # a file a sync brought applies from now on
    if as_json:
        emit_json({"trusted": str(file), "settings": sensitive})
        return
    what = ", ".join(sensitive) if sensitive else "nothing sensitive yet"
    click.echo(f"Trusted {file} as it is now ({what}). After it changes, run 'memdir trust' again.")


def _current(path: Path, sha256: str) -> bool:
    try:
        return digest(path) == sha256
    except OSError:
        return False


COMMANDS = [trust_cmd]
