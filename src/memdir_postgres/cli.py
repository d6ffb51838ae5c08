"""``memdir tokens``: the people and agents of a team's database, and what each may do; and
``memdir export`` / ``import``: a store moved to and from a files store (``transfer``).

``add`` makes an identity with its grants (``--store team:read --store alice:write``) and
shows its token once; ``list`` shows every identity and its grants (never a token); ``revoke``
stops a token for good (what it wrote stays, in its name). A ``memdir mcp --http`` on that
database then authenticates every client as someone (``team``).
This module does NOT serve requests.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memdir.cli.context import (
    Ctx,
    emit_json,
    existing_store,
    fail,
    json_option,
    pass_ctx,
    scope_option,
)
from memdir.gate.safetext import for_terminal, plural
from memdir.scopes import PROJECT

if TYPE_CHECKING:
    import psycopg


def _connection(c: Ctx) -> psycopg.Connection[Any]:
    """The database's owner connection, with the identity tables made."""
    from memdir_postgres import pgschema, pgteam

    url = c.config.database_url
    if not url:
        fail(
            "identities live in a team's database — pass --db URL (or set MEMDIR_DATABASE_URL);"
            " a server for one person uses its --token"
        )
    conn = pgschema.connect(url, autocommit=True)
    pgschema.ensure_schema(conn)
    pgteam.ensure(conn)
    return conn


@click.group("tokens", short_help="Identities of a team's database: who may read or write what.")
def tokens() -> None:
    """The people and agents a team's memory server knows, each with its own token and the
    stores it may read or write."""


@tokens.command("add")
@click.argument("name")
@click.option(
    "--store",
    "grants",
    multiple=True,
    metavar="STORE:read|write",
    help="A store NAME may read or write (repeat; the store is made if missing).",
)
@json_option
@pass_ctx
def add(c: Ctx, name: str, grants: tuple[str, ...], as_json: bool) -> None:
    """Make identity NAME and show its token (only now: keep it where its client runs)."""
    from memdir_postgres import pgteam

    parsed = [pgteam.parse_grant(g) for g in grants]
    if not parsed:
        fail(f"give NAME at least one store: memdir tokens add {name} --store {name}:write")
    conn = _connection(c)
    try:
        identity, token = pgteam.add(conn, name, parsed)
    finally:
        conn.close()
    shown = ", ".join(f"{s}:{m}" for s, m in identity.grants)
    if as_json:
        emit_json({"name": identity.name, "grants": shown.split(", "), "token": token})
        return
    click.echo(f"Identity {identity.name} ({shown}). Its token, shown only now:\n{token}")


@tokens.command("list")
@json_option
@pass_ctx
def list_(c: Ctx, as_json: bool) -> None:
    """Every identity, its grants and whether its token still works (tokens are not kept)."""
    from memdir_postgres import pgteam

    conn = _connection(c)
    try:
        rows = pgteam.listed(conn)
    finally:
        conn.close()
    if as_json:
        emit_json([{"name": n, "created": cr, "revoked": rv, "grants": g} for n, cr, rv, g in rows])
        return
    if not rows:
        click.echo("No identities: the server takes one --token (memdir tokens add NAME …).")
    for name, created, revoked, grants in rows:
        state = f"revoked {revoked}" if revoked else f"since {created}"
        click.echo(f"{for_terminal(name)}  {', '.join(grants) or '(no stores)'}  ({state})")


@tokens.command("revoke")
@click.argument("name")
@pass_ctx
def revoke(c: Ctx, name: str) -> None:
    """Stop NAME's token (servers refuse it within seconds; its writes stay its own)."""
    from memdir_postgres import pgteam

    conn = _connection(c)
    try:
        pgteam.revoke(conn, name)
    finally:
        conn.close()
    click.echo(f"Revoked {name}: its token no longer works.")


@click.command("export", short_help="Write the store as a files store (memories and history).")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@scope_option(PROJECT, writes=True)
@json_option
@pass_ctx
def export_cmd(c: Ctx, dest: Path, scope: str, as_json: bool) -> None:
    """Write the store (a folder, or a store in PostgreSQL) to DEST as a files store: every
    memory byte for byte, and its history; DEST must hold no memories yet."""
    from memdir_postgres.transfer import export

    store = existing_store(c, scope)
    op = export(store, dest)
    count = len(op.changes) if op else 0
    if as_json:
        emit_json({"exported": count, "to": str(dest)})
    else:
        click.echo(f"Exported {plural(count, 'memory', 'memories')} (and their history) to {dest}.")


@click.command("import", short_help="Load a files store (memories and history) into this one.")
@click.argument("src", type=click.Path(file_okay=False, path_type=Path))
@scope_option(PROJECT, writes=True)
@json_option
@pass_ctx
def import_cmd(c: Ctx, src: Path, scope: str, as_json: bool) -> None:
    """Load the files store at SRC into this store (a folder, or a store in PostgreSQL):
    memories byte for byte, history with its version numbers; nothing is written when a
    name is taken here already."""
    from memdir_postgres.transfer import import_store

    c.create_store = True
    store = c.store if scope == PROJECT else c.scopes(scope, require=False).writable(scope)
    op = import_store(src, store)
    count = len(op.changes) if op else 0
    if as_json:
        emit_json({"imported": count, "from": str(src)})
    else:
        click.echo(
            f"Imported {plural(count, 'memory', 'memories')} (and their history) from {src}."
        )
