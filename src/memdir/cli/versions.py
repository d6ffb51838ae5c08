"""``memdir history``, ``diff``, ``restore``, ``undo`` and ``log``: what changed, and
bringing it back. This module does NOT change memories except through the store.
"""

from __future__ import annotations

import click

from .. import memory as memfmt
from ..config import standing_kind
from ..errors import MemdirError
from ..gate.safetext import for_terminal, for_terminal_text
from ..scopes import PROJECT
from ..store.base import RESTORED
from .context import Ctx, emit_json, fail, json_option, name_and_version, pass_ctx, scope_option


@click.command(short_help="Show what changed between versions.")
@click.argument("spec")
@click.argument("other", required=False)
@scope_option("all")
@json_option
@pass_ctx
def diff(c: Ctx, spec: str, other: str | None, scope: str, as_json: bool) -> None:
    """Show what changed: NAME, between its latest earlier version and now; NAME@vN, between
    that version and now; NAME@vN NAME@vM (or @vM), between the two (versions from 'memdir
    history NAME'; user:NAME for the user's copy)."""
    import difflib

    name, first = name_and_version(spec)
    store, name, _ = c.pick(name, scope)
    second = None
    if other is not None:
        other_name, second = name_and_version(other if "@" in other else f"{name}@{other}")
        if second is None or other_name not in (name, spec.partition("@")[0], ""):
            fail(f"{other!r} is not {name}@vN — compare two versions of one memory")

    def text_of(v: int | None) -> tuple[str, str]:
        if v is None:
            return memfmt.dumps(store.get(name)), "current"
        return store.version_text(name, v), f"v{v}"

    if first is None:
        past = store.history(name)
        if not past:
            fail(f"memory {name!r} has no earlier version — nothing to compare")
        first = past[-1].version
    a, b = text_of(first), text_of(second)
    lines = list(
        difflib.unified_diff(
            a[0].splitlines(True), b[0].splitlines(True), f"{name}@{a[1]}", f"{name}@{b[1]}"
        )
    )
    if as_json:
        emit_json({"name": name, "from": a[1], "to": b[1], "diff": "".join(lines)})
        return
    click.echo(for_terminal_text("".join(lines)) if lines else "No differences.", nl=not lines)


@click.command()
@click.argument("name")
@scope_option("all")
@json_option
@pass_ctx
def history(c: Ctx, name: str, scope: str, as_json: bool) -> None:
    """List the earlier versions of NAME."""
    store, name, _ = c.pick(name, scope)
    memfmt.validate_name(name)
    versions = store.history(name)
    by = {op.id: op.source for op in store.log()} if versions else {}
    if as_json:
        emit_json([dict(v.to_dict(), by=by.get(v.op)) for v in versions])
        return
    if not versions:
        click.echo(f"No history for {name}.")
    for v in versions:
        why = f" — {for_terminal(v.reason)}" if v.reason else ""
        why += f" (by {for_terminal(by[v.op])})" if by.get(v.op) else ""
        try:
            held = memfmt.loads(store.version_text(name, v.version)).description
        except MemdirError:
            held = "(unreadable)"
        click.echo(f"v{v.version}  {v.time}  {v.action}{why}\n      {for_terminal(held)}")


@click.command(short_help="Bring back an earlier version of NAME (or NAME@vN).")
@click.argument("name")
@scope_option(None, writes=True, holds=True)
@pass_ctx
def restore(c: Ctx, name: str, scope: str | None) -> None:
    """Bring back an earlier version of NAME (NAME@vN: that one; default: the latest)."""
    name, version = name_and_version(name)
    if scope is None and ":" not in name:
        scope = PROJECT  # a deleted memory is in no scope's listing: the project's by default
    store, name, _ = c.pick(name, scope, write=True)
    mem = store.restore(name, version, source=c.source)
    if store.origin(mem.name, mem.digest).label == RESTORED and standing_kind(mem.type, mem.pinned):
        click.echo(
            f"Restored {mem.name}: a text you did not give, so it is not your rule until you"
            f" accept it ('memdir show {mem.name}', then 'memdir accept {mem.name}')."
        )
        return
    click.echo(f"Restored {mem.name}.")


@click.command(short_help="Revert the last change.")
@scope_option(PROJECT, writes=True)
@click.option("--force", is_flag=True, help="Revert even a memory changed by hand since.")
@pass_ctx
def undo(c: Ctx, scope: str, force: bool) -> None:
    """Revert the last change (an extraction, a consolidation, an add…) of the project's
    store, or of the user's with --scope user. A memory changed by hand since is not
    reverted over that change without --force."""
    from ..undo import undo as undo_last

    store = c.store if scope == PROJECT else c.scopes(require=False).writable(scope)
    target, _ = undo_last(store, force=force)
    names = ", ".join(ch["name"] for ch in target.changes) or "nothing"
    where = "" if scope == PROJECT else f" in the {scope} store"
    click.echo(f"Reverted {target.source} {target.id}{where} ({names}).")


@click.command(short_help="What changed, when and why.")
@click.option(
    "-n",
    "limit",
    default=20,
    show_default=True,
    type=click.IntRange(1, 100000),
    help="How many of the latest operations.",
)
@scope_option("all")
@json_option
@pass_ctx
def log(c: Ctx, limit: int, scope: str, as_json: bool) -> None:
    """What changed, when and why: the latest operations, newest last."""
    scopes = c.scopes(scope)
    # within one second, each store's own order (its log is appended in order)
    ranked = sorted(
        (
            (op.time, n, i, op, sc.name)
            for n, (sc, st) in enumerate(s for s in scopes.stores() if s[0].writable)
            for i, op in enumerate(st.log(limit))
        ),
        key=lambda t: t[:3],
    )
    ops = [(op, name) for *_, op, name in ranked][-limit:]
    several = len({sc for _, sc in ops}) > 1
    if as_json:
        emit_json([{**op.to_dict(), "scope": sc} for op, sc in ops])
        return
    if not ops:
        click.echo("No changes recorded yet.")
    for op, sc in ops:
        where = f"[{sc}]  " if several else ""
        click.echo(
            f"{op.time}  {where}{op.id}  {op.source}"
            + (f" — {for_terminal(op.summary)}" if op.summary else "")
        )
        for ch in op.changes:
            why = f" ({for_terminal(ch['reason'])})" if ch.get("reason") else ""
            click.echo(f"    {ch['action']:<6} {ch['name']}{why}")


COMMANDS = [diff, history, restore, undo, log]
