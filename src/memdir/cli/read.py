"""``memdir list``, ``show`` and ``search``: reading memories, from every scope.
This module does NOT change anything.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from .. import memory as memfmt
from ..gate.provenance import ORIGIN_CLAIMS, Origin
from ..gate.safetext import display_width, for_terminal, for_terminal_text, pad, plural
from ..scopes import PROJECT, Scopes
from ..store import origin_of
from .context import Ctx, emit_json, json_option, name_and_version, pass_ctx, scope_option


@click.command("list", short_help="List memories: name, type and description.")
@click.option("--type", "type_", help="Only memories of this type.")
@scope_option("all")
@json_option
@pass_ctx
def list_(c: Ctx, type_: str | None, scope: str, as_json: bool) -> None:
    """List memories: name, type, description (and scope, when there are several)."""
    scopes = c.scopes(scope)
    rows = [
        (sc.name, e, shown) for sc, e, shown in scopes.located() if type_ is None or e.type == type_
    ]
    if as_json:
        emit_json(
            [
                {**e.to_dict(), "name": shown, "scope": sc, "from": _origin(scopes, shown)}
                for sc, e, shown in rows
            ]
        )
        return
    invalid = sum(p.severity == "error" for _, st in scopes.stores() for p in st.problems())
    if invalid:
        click.echo(f"{plural(invalid, 'invalid file')} skipped — see 'memdir doctor'", err=True)
    if not rows:
        click.echo("No memories." if type_ is None else f"No memories of type {type_}.")
        return
    several = len({sc for sc, _, _ in rows}) > 1 or any(sc != PROJECT for sc, _, _ in rows)
    if c.config.database_url and c.config.store != "default":  # a named database store: its name
        rows = [(c.config.store if sc == PROJECT else sc, e, shown) for sc, e, shown in rows]
    width = min(40, max(display_width(shown) for _, _, shown in rows))
    twidth = min(30, max(display_width(for_terminal(e.type)) for _, e, _ in rows))
    swidth = max(len(sc) for sc, _, _ in rows)
    for sc, e, shown in rows:
        pin = (" 📌" if e.pinned else "") + (" ⚠ conflicted" if e.conflicted else "")
        where = f"{pad(sc, swidth)}  " if several else ""
        click.echo(
            f"{where}{pad(shown, width)}  {pad(for_terminal(e.type), twidth)}"
            f"  {for_terminal(e.description)}{pin}"
        )


@click.command(short_help="Print the memory NAME (or NAME@vN).")
@click.argument("name")
@scope_option("all")
@json_option
@pass_ctx
def show(c: Ctx, name: str, scope: str, as_json: bool) -> None:
    """Print the memory NAME (NAME@v2: an earlier version, see 'memdir history'; user:NAME:
    the one in the user's store)."""
    name, version = name_and_version(name)
    store, name, where = c.pick(name, scope)
    if version is not None:
        text = store.version_text(name, version)
        if as_json:
            emit_json({**memfmt.loads(text).to_dict(), "version": version})
        else:
            click.echo(for_terminal_text(text), nl=False)
        return
    mem = store.get(name)
    origin = Origin(where) if where.startswith("shared") else store.origin(name)
    if as_json:
        emit_json({**mem.to_dict(), "from": origin.to_dict()})
    else:
        text = memfmt.dumps(mem)
        place = store.place_of(name)
        if memfmt.git_conflicted(mem) and isinstance(place, Path):  # both sides, as git left them
            with contextlib.suppress(OSError, UnicodeDecodeError):
                text = place.read_text(encoding="utf-8")
        click.echo(for_terminal_text(text), nl=False)
        when = f", {origin.at}" if origin.at else ""
        click.echo(f"(from: {for_terminal(origin.label)}{when})", err=True)
        claims = sorted(k for k in mem.extra if k.lower() in ORIGIN_CLAIMS)
        if claims:
            fields = ", ".join(f"'{for_terminal(k)}:'" for k in claims)
            click.echo(
                f"(its own {fields} field is what the file claims, not where it came from)",
                err=True,
            )


def _origin(scopes: Scopes, shown: str) -> str:
    return origin_of(scopes, shown).label


@click.command(short_help="Search memories (BM25, with meaning when memdir[embed] is in).")
@click.argument("query", nargs=-1, required=True)
@click.option(
    "-k", "k", default=5, show_default=True, type=click.IntRange(1, 1000), help="How many results."
)
@click.option(
    "--explain",
    is_flag=True,
    help="Show each method's rank and score: BM25, and embedding similarity.",
)
@click.option(
    "--as-of",
    "as_of",
    metavar="DATE",
    help="Search what the memories said then (2026-11-02, a UTC time, 'last week'), from history.",
)
@scope_option("all")
@json_option
@pass_ctx
def search(
    c: Ctx,
    query: tuple[str, ...],
    k: int,
    explain: bool,
    as_of: str | None,
    scope: str,
    as_json: bool,
) -> None:
    """Search names, descriptions and bodies of every scope: BM25 (scores comparable across
    stores), fused with embedding similarity when memdir[embed] is installed (see 'embedder'
    in config.toml). With --as-of, what the memories said at that time (BM25)."""
    scopes = c.scopes(scope)
    if as_of is not None:
        _search_as_of(scopes, " ".join(query), as_of, k, as_json)
        return
    hits = scopes.search(" ".join(query), k, explain=explain)
    several = len(scopes.stores()) > 1
    if as_json:
        emit_json([h.to_dict(explain=explain) for h in hits])
        return
    if explain:
        from ..find.asked import explain as weighs

        click.echo(scopes.ranking_note())
        for line in weighs(" ".join(query)):
            click.echo(line)
    if not hits:
        click.echo("No matching memories.")
    for h in hits:
        where = f"[{h.scope}] " if several else ""
        click.echo(
            f"{h.score:6.2f}  {where}{h.name}  ({for_terminal(h.entry.type)}) —"
            f" {for_terminal(h.entry.description)}"
        )
        if explain:
            bm25 = "—" if h.bm25_rank is None else f"#{h.bm25_rank} ({h.bm25:.2f})"
            dense = "—" if h.dense_rank is None else f"#{h.dense_rank} ({h.cosine:.3f})"
            then = "" if h.weight == 1.0 else f"   said in the period asked about: ×{h.weight:g}"
            click.echo(f"        BM25 {bm25}   dense {dense}{then}")


def _search_as_of(scopes: Scopes, query: str, as_of: str, k: int, as_json: bool) -> None:
    from .. import wings

    when, found = wings.need("memdir.asof", "search")(scopes, query, as_of, k)
    if as_json:
        emit_json(
            [
                {
                    **held.memory.to_dict(),
                    "scope": scope,
                    "score": round(score, 4),
                    "current": held.current,
                    "replaced": held.until,
                }
                for scope, held, score in found
            ]
        )
        return
    if not found:
        click.echo(f"No matching memories as of {when}.")
    several = len(scopes.stores()) > 1
    for scope, held, score in found:
        where = f"[{scope}] " if several else ""
        mem = held.memory
        now = "" if held.current else f"  [replaced {held.until}]"
        click.echo(
            f"{score:6.2f}  {where}{mem.name}  ({for_terminal(mem.type)}) —"
            f" {for_terminal(mem.description)}{now}"
        )


COMMANDS = [list_, show, search]
