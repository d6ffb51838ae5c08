"""The ``memdir`` command line: parse, call the library, print.

This is the only place errors are rendered (one line on stderr, exit 1; usage errors exit 2).
Commands that need no LLM never import an LLM SDK: model-building code is imported inside
the commands that use it. This module does NOT contain memory logic.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from . import memory as memfmt
from .cli_context import Ctx, F, emit_json, fail, json_option, pass_ctx
from .errors import InvalidMemory, MemdirError, StoreNotFound
from .layout import INTERNAL
from .plan import Put
from .safetext import display_width, for_terminal, for_terminal_text, pad, plural
from .scopes import PROJECT, USER, route
from .store import MemoryStore


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--dir", "dir_", type=click.Path(file_okay=False, path_type=Path),
              help="The memory folder (default ./.memory, or $MEMDIR_DIR).")
@click.option("--provider", type=click.Choice(["anthropic", "openai", "claude-code", "codex"]),
              help="LLM provider (claude-code and codex run the host's CLI headless).")
@click.option("--model", help="Main (agent) model.")
@click.option("--memory-model", help="Cheaper model for memory operations.")
@click.option("--timeout", type=click.FloatRange(min=0.1), help="Seconds per model request.")
@click.option("--max-retries", type=click.IntRange(min=0), help="Retries of a failed request.")
@click.option("--also", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="Another store to recall from, read-only (repeatable).")
@click.version_option(package_name="memdir")
@click.pass_context
def cli(ctx: click.Context, dir_: Path | None, provider: str | None, model: str | None,
        memory_model: str | None, timeout: float | None, max_retries: int | None,
        also: tuple[Path, ...]) -> None:
    """Long-term memory for LLM agents, kept as a folder of Markdown files."""
    ctx.obj = Ctx({"dir": dir_, "provider": provider, "model": model,
                   "memory_model": memory_model, "timeout": timeout,
                   "max_retries": max_retries, "also": also})


def scope_option(default: str | None, writes: bool = False) -> Callable[[F], F]:
    """``--scope``: project, user (or all, for reads)."""
    choices = ["project", "user"] if writes else ["project", "user", "all"]
    if writes and default is None:
        what = "where to write (default: user for user_preference, else project)"
    else:
        what = f"which {'store' if writes else 'stores'} (default: {default})"
    option: Callable[[F], F] = click.option("--scope", type=click.Choice(choices),
                                            default=default, help=f"Scope: {what}.")
    return option


@cli.command()
@pass_ctx
def init(c: Ctx) -> None:
    """Create the memory folder and its index."""
    c.create_store = True
    existed = (c.config.dir / INTERNAL).is_dir()
    store = c.store
    verb = "Memory store already exists" if existed else "Created memory store"
    click.echo(f"{verb} in {store.root} ({plural(len(store), 'memory', 'memories')}).")


def _read_body(body: str | None, body_file: Path | None) -> str:
    if body is not None and body_file is not None:
        raise click.UsageError("give the body with --body or --body-file, not both")
    if body is not None:
        return body
    if body_file is not None:
        try:
            return body_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"cannot read {body_file} ({exc}) — pass a readable UTF-8 file")
    return "" if sys.stdin.isatty() else sys.stdin.read()


@cli.command(short_help="Create or update the memory NAME.")
@click.argument("name")
@click.option("--type", "type_", required=True, help="user_preference, project_fact, feedback…")
@click.option("--description", "-d", required=True, help="One line: what the memory is about.")
@click.option("--body", help="The memory text (else --body-file, else stdin).")
@click.option("--body-file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--allow-secret", is_flag=True, help="Store text that looks like a credential.")
@scope_option(None, writes=True)
@pass_ctx
def add(c: Ctx, name: str, type_: str, description: str, body: str | None,
        body_file: Path | None, allow_secret: bool, scope: str | None) -> None:
    """Create or update the memory NAME (user_preference goes to the user's own store)."""
    text = _read_body(body, body_file)
    scope = route(c.config, type_, scope)
    c.create_store = scope == PROJECT
    store = c.store if scope == PROJECT else c.scopes(require=False).writable(scope)
    existed = name in store
    before = store.get(name).digest if existed else None
    mem = store.write(name, type=type_, description=description, body=text, source="cli",
                      secrets="allow" if allow_secret else "refuse")
    if existed and mem.digest == before:
        click.echo(f"Unchanged {mem.name}: it already says exactly this.")
        return
    where = "" if scope == PROJECT else f" in the {scope} store"
    path = mem.path if scope == PROJECT else store.root / f"{mem.name}.md"
    click.echo(f"{'Updated' if existed else 'Saved'} {mem.name}{where} ({path}).")


@cli.command("list", short_help="List memories: name, type and description.")
@click.option("--type", "type_", help="Only memories of this type.")
@scope_option("all")
@json_option
@pass_ctx
def list_(c: Ctx, type_: str | None, scope: str, as_json: bool) -> None:
    """List memories: name, type, description (and scope, when there are several)."""
    scopes = c.scopes(scope)
    rows = [(sc.name, e, shown) for sc, e, shown in scopes.located()
            if type_ is None or e.type == type_]
    if as_json:
        emit_json([{**e.to_dict(), "name": shown, "scope": sc} for sc, e, shown in rows])
        return
    invalid = sum(p.severity == "error" for _, st in scopes.stores() for p in st.problems())
    if invalid:
        click.echo(f"{plural(invalid, 'invalid file')} skipped — see 'memdir doctor'", err=True)
    if not rows:
        click.echo("No memories." if type_ is None else f"No memories of type {type_}.")
        return
    several = len({sc for sc, _, _ in rows}) > 1 or any(sc != PROJECT for sc, _, _ in rows)
    width = min(40, max(display_width(shown) for _, _, shown in rows))
    twidth = min(30, max(display_width(for_terminal(e.type)) for _, e, _ in rows))
    swidth = max(len(sc) for sc, _, _ in rows)
    for sc, e, shown in rows:
        pin = " 📌" if e.pinned else ""
        where = f"{pad(sc, swidth)}  " if several else ""
        click.echo(f"{where}{pad(shown, width)}  {pad(for_terminal(e.type), twidth)}"
                   f"  {for_terminal(e.description)}{pin}")


def _name_and_version(spec: str) -> tuple[str, int | None]:
    """``NAME`` or ``NAME@vN`` (``NAME.md`` is accepted for a file name)."""
    name, _, ver = spec.partition("@")
    name = name[:-3] if name.endswith(".md") else name
    if not ver:
        return name, None
    if not re.fullmatch(r"v?\d+", ver):
        fail(f"{spec!r} is not NAME@vN — see 'memdir history {name}' for the versions")
    return name, int(ver.lstrip("v"))


@cli.command(short_help="Print the memory NAME (or NAME@vN).")
@click.argument("name")
@scope_option("all")
@json_option
@pass_ctx
def show(c: Ctx, name: str, scope: str, as_json: bool) -> None:
    """Print the memory NAME (NAME@v2: an earlier version, see 'memdir history'; user:NAME:
    the one in the user's store)."""
    name, version = _name_and_version(name)
    store, name, _ = c.pick(name, scope)
    if version is not None:
        text = store.version_text(name, version)
        if as_json:
            emit_json({**memfmt.loads(text).to_dict(), "version": version})
        else:
            click.echo(for_terminal_text(text), nl=False)
        return
    mem = store.get(name)
    if as_json:
        emit_json(mem.to_dict())
    else:
        click.echo(for_terminal_text(memfmt.dumps(mem)), nl=False)


@cli.command(short_help="Show what changed between versions.")
@click.argument("name")
@click.argument("versions", nargs=-1)
@scope_option("all")
@json_option
@pass_ctx
def diff(c: Ctx, name: str, versions: tuple[str, ...], scope: str, as_json: bool) -> None:
    """Show what changed: between the latest earlier version and now, between version V1 and
    now, or between V1 and V2 (numbers from 'memdir history NAME'; user:NAME for the user's)."""
    import difflib

    name = _name_and_version(name)[0]
    store, name, _ = c.pick(name, scope)
    if len(versions) > 2:
        raise click.UsageError("give at most two versions")

    def text_of(v: str | None) -> tuple[str, str]:
        if v is None or v in ("current", "now"):
            return memfmt.dumps(store.get(name)), "current"
        if not re.fullmatch(r"v?\d+", v):
            fail(f"{v!r} is not a version number — see 'memdir history {name}'")
        n = int(v.lstrip("v"))
        return store.version_text(name, n), f"v{n}"

    if versions:
        a, b = text_of(versions[0]), text_of(versions[1] if len(versions) > 1 else None)
    else:
        past = store.history(name)
        if not past:
            fail(f"memory {name!r} has no earlier version — nothing to compare")
        a, b = text_of(str(past[-1].version)), text_of(None)
    lines = list(difflib.unified_diff(a[0].splitlines(True), b[0].splitlines(True),
                                      f"{name}@{a[1]}", f"{name}@{b[1]}"))
    if as_json:
        emit_json({"name": name, "from": a[1], "to": b[1], "diff": "".join(lines)})
        return
    click.echo(for_terminal_text("".join(lines)) if lines else "No differences.", nl=not lines)


@cli.command(short_help="Rename a memory, or move it to another scope.")
@click.argument("old")
@click.argument("new", required=False)
@click.option("--to", "to", type=click.Choice(["project", "user"]),
              help="Move OLD to this scope's store (its history stays where it was).")
@pass_ctx
def mv(c: Ctx, old: str, new: str | None, to: str | None) -> None:
    """Rename the memory OLD to NEW (its history moves with it), or move it to another scope
    with --to (mv --to user NAME)."""
    if to is None:
        if new is None:
            raise click.UsageError("give NEW, or --to project|user")
        store, old, _ = c.pick(old, write=True)
        mem = store.rename(old, new, source="cli")
        click.echo(f"Renamed {old} to {mem.name}.")
        return
    source, name, here = c.pick(old, write=True)
    if here == to:
        fail(f"{name} is already in the {to} store")
    target = c.scopes().writable(to)
    if name in target:
        fail(f"the {to} store already has {name} — rename one first ('memdir mv')")
    mem = source.get(name)
    target.apply([Put(mem.replace(name=new or name), reason=f"moved from the {here} store")],
                  source="cli", summary=f"moved {name} from {here}")
    source.delete(name, reason=f"moved to the {to} store", source="cli")
    click.echo(f"Moved {name} from the {here} store to the {to} store"
               f" ({target.root / f'{new or name}.md'}).")


@cli.command(short_help="Pin NAME: first in the index, never auto-changed.")
@click.argument("name")
@pass_ctx
def pin(c: Ctx, name: str) -> None:
    """Pin NAME: shown first in the system prompt's index, never changed by extraction or
    consolidation (`pinned: true` in its frontmatter)."""
    store, name, _ = c.pick(name, write=True)
    changed = store.set_pinned(name, True, source="cli")
    click.echo(f"Pinned {name}." if changed else f"{name} was already pinned; unchanged.")


@cli.command()
@click.argument("name")
@pass_ctx
def unpin(c: Ctx, name: str) -> None:
    """Unpin NAME."""
    store, name, _ = c.pick(name, write=True)
    changed = store.set_pinned(name, False, source="cli")
    click.echo(f"Unpinned {name}." if changed else f"{name} was not pinned; unchanged.")


def _keep_edit(name: str, text: str) -> str:
    """Where an edit that could not be saved is kept (owner-only), so none is lost."""
    import tempfile

    fd, path = tempfile.mkstemp(prefix=f"memdir-edit-{name}-", suffix=".md")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


@cli.command(short_help="Edit the memory NAME in $EDITOR.")
@click.argument("name")
@pass_ctx
def edit(c: Ctx, name: str) -> None:
    """Edit the memory NAME in $EDITOR; it is validated before it is saved."""
    store, name, _ = c.pick(name, write=True)
    mem = store.get(name)
    original = (store.root / str(mem.path)).read_text(encoding="utf-8")
    text = original
    while True:
        edited = click.edit(text, extension=".md", require_save=True)
        if edited is None or edited == original:
            click.echo("No changes.")
            return
        try:
            new = memfmt.loads(edited)
            if new.name != mem.name:
                raise InvalidMemory(f"the name must stay {mem.name!r} — use 'memdir mv' to"
                                    " rename")
            new = memfmt.validate_new(new, store.config.types)
            store.apply([Put(new, reason="edited by hand", expect=mem.digest,
                             merge_extra=False)], source="edit")
        except MemdirError as exc:  # invalid, a secret, changed meanwhile: never lose the text
            click.echo(f"memdir: error: {exc}", err=True)
            if sys.stdin.isatty() and click.confirm("Reopen the editor?", default=True):
                text = edited
                continue
            kept = _keep_edit(name, edited)
            fail(f"the edit was not saved; your text is in {kept} — fix it and run"
                 f" 'memdir edit {name}' again")
        break
    click.echo(f"Saved {mem.name}.")


@cli.command(short_help="Delete the memory NAME (it stays in history; --purge: for good).")
@click.argument("name")
@scope_option(None, writes=True)
@click.option("--purge", is_flag=True,
              help="Remove it and its history for good (NAME@vN: only that version).")
@click.option("--yes", is_flag=True, help="Do not ask before --purge.")
@pass_ctx
def rm(c: Ctx, name: str, scope: str | None, purge: bool, yes: bool) -> None:
    """Delete the memory NAME (it stays in history); without --scope, the first scope that
    holds it (project first). --purge removes it and every kept version for good (a secret
    that reached it), after asking."""
    name, version = _name_and_version(name)
    if version is not None and not purge:
        fail("a version is removed only with --purge — 'memdir rm --purge NAME@vN'")
    store, name, where = c.pick(name, scope, write=True)
    if purge:
        what = f"version {version} of {name}" if version else f"{name} and all its history"
        if not yes:
            if not sys.stdin.isatty():
                fail(f"purging {what} cannot be undone — confirm with --yes")
            click.confirm(f"Remove {what} for good? This cannot be undone", abort=True)
        gone = store.purge(name, version, source="cli")
        click.echo(f"Purged {what} ({plural(gone, 'version', 'versions')} removed).")
        return
    store.delete(name, reason="removed with memdir rm", source="cli")
    again = f"memdir restore {name}" + ("" if where == PROJECT else f" --scope {where}")
    click.echo(f"Deleted {name}{'' if where == PROJECT else f' from the {where} store'};"
               f" '{again}' brings it back.")


@cli.command()
@click.argument("name")
@scope_option("all")
@json_option
@pass_ctx
def history(c: Ctx, name: str, scope: str, as_json: bool) -> None:
    """List the earlier versions of NAME."""
    store, name, _ = c.pick(name, scope)
    memfmt.validate_name(name)
    versions = store.history(name)
    if as_json:
        emit_json([v.to_dict() for v in versions])
        return
    if not versions:
        click.echo(f"No history for {name}.")
    for v in versions:
        why = f" — {for_terminal(v.reason)}" if v.reason else ""
        try:
            held = memfmt.loads(store.version_text(name, v.version)).description
        except MemdirError:
            held = "(unreadable)"
        click.echo(f"v{v.version}  {v.time}  {v.action}{why}\n      {for_terminal(held)}")


@cli.command()
@click.argument("name")
@click.option("--version", "version", type=int, help="Version number (default: the latest).")
@scope_option(None, writes=True)
@pass_ctx
def restore(c: Ctx, name: str, version: int | None, scope: str | None) -> None:
    """Bring back an earlier version of NAME."""
    if scope is None and ":" not in name:
        scope = PROJECT  # a deleted memory is in no scope's listing: the project's by default
    store, name, _ = c.pick(name, scope, write=True)
    mem = store.restore(name, version, source="cli")
    click.echo(f"Restored {mem.name}.")


def _existing(c: Ctx, scope: str) -> MemoryStore:
    """The project's or the user's store, which must exist already (never created here)."""
    if scope == PROJECT:
        return c.store
    scopes = c.scopes(scope)
    found = scopes.stores()
    if not found:
        raise StoreNotFound(f"no {scope} store yet at {scopes.scope(scope).root} — "
                            f"'memdir add --scope {scope}' creates it")
    return found[0][1]


@cli.command(short_help="Rebuild MEMORY.md and the search index, and embed every memory.")
@scope_option(PROJECT, writes=True)
@click.option("--background", is_flag=True, hidden=True)
@json_option
@pass_ctx
def index(c: Ctx, scope: str, background: bool, as_json: bool) -> None:
    """Rebuild MEMORY.md (and the caches) from the files of the project's store (or the
    user's, with --scope user), and embed every memory for search by meaning now (searches
    otherwise do it a few seconds at a time, and in the background)."""
    store = _existing(c, scope)
    if background:
        _embed_quietly(store)
        return
    count = len(store.rebuild())
    from .cli_context import _Progress

    progress = _Progress("Embedding memories for search") if sys.stderr.isatty() else None
    try:
        embedded = store.embed_all(progress)
    finally:
        if progress is not None:
            progress.close()
    if as_json:
        emit_json({"index": str(store.index_path), "memories": count, "embedded": embedded})
    else:
        click.echo(f"Indexed {count} memories in {store.index_path}"
                   + (f"; {embedded} embedded for search by meaning." if embedded else "."))


def _embed_quietly(store: MemoryStore) -> None:
    """The background embedder: low priority, one at a time per store, resumable (what it
    embedded is kept if it is stopped)."""
    import filelock

    from .layout import INTERNAL

    os.nice(10)
    try:
        with filelock.FileLock(str(store.root / INTERNAL / "embedding.lock"), timeout=0):
            store.embed_all()
    except filelock.Timeout:
        return  # another one is at work


@cli.command(short_help="Check the store and report problems.")
@click.option("--fix", is_flag=True, help="Repair what can be repaired (never memory files).")
@scope_option(PROJECT, writes=True)
@json_option
@pass_ctx
def doctor(c: Ctx, fix: bool, scope: str, as_json: bool) -> None:
    """Check the project's store (or the user's, with --scope user): invalid files,
    rule-bending memories, stale index."""
    from .doctor import diagnose

    store = _existing(c, scope)
    report = diagnose(store, fix=fix)
    if scope == PROJECT:
        _hook_report(store, report)
        if c.config.ignored:
            from .config import untrusted_line

            report.warnings.append({"file": str(c.config.config_file),
                                    "reason": untrusted_line(c.config).split(": ", 1)[1]})
    if as_json:
        emit_json(report.to_dict())
    else:
        for line in report.lines():
            click.echo(line)
    if report.errors:
        sys.exit(1)


def _hook_report(store: MemoryStore, report: Any) -> None:
    """Which host hooks are installed, and how the last learn ended."""
    from .integrations.hooks import installed, last_learn

    places = installed(store.root.absolute().parent)
    report.hooks = places
    if places:
        report.notes.append("hooks installed: " + "; ".join(places))
    last = last_learn(store.root)
    if last is not None:
        how = ("ok" if last.get("status") == "ok"
               else f"failed: {last.get('error', 'unknown error')}")
        report.notes.append(f"last learn hook: {last.get('time')} ({last.get('host')}) {how}")
        if last.get("status") != "ok":
            report.warnings.append({"file": ".memdir/hooks.jsonl",
                                    "reason": f"the last learn hook failed: {last.get('error')}"})


@cli.command(short_help="Search memories (BM25, with meaning when memdir[embed] is in).")
@click.argument("query", nargs=-1, required=True)
@click.option("-k", "k", default=5, show_default=True, type=click.IntRange(1, 1000),
              help="How many results.")
@click.option("--explain", is_flag=True,
              help="Show each method's rank and score: BM25, and embedding similarity.")
@scope_option("all")
@json_option
@pass_ctx
def search(c: Ctx, query: tuple[str, ...], k: int, explain: bool, scope: str,
           as_json: bool) -> None:
    """Search names, descriptions and bodies of every scope: BM25 (scores comparable across
    stores), fused with embedding similarity when memdir[embed] is installed (see 'embedder'
    in config.toml)."""
    scopes = c.scopes(scope)
    hits = scopes.hits(" ".join(query), k, explain=explain)
    several = len(scopes.stores()) > 1
    if as_json:
        emit_json([{**e.to_dict(), "scope": sc.name, "score": round(r.score, 4),
                    **({"bm25_rank": r.bm25_rank, "bm25": _round(r.bm25),
                        "dense_rank": r.dense_rank, "cosine": _round(r.cosine)}
                       if explain else {})} for sc, e, r in hits])
        return
    if explain:
        click.echo(scopes.ranking_note())
    if not hits:
        click.echo("No matching memories.")
    for sc, e, r in hits:
        where = f"[{sc.name}] " if several else ""
        click.echo(f"{r.score:6.2f}  {where}{e.name}  ({for_terminal(e.type)}) —"
                   f" {for_terminal(e.description)}")
        if explain:
            bm25 = "—" if r.bm25_rank is None else f"#{r.bm25_rank} ({r.bm25:.2f})"
            dense = "—" if r.dense_rank is None else f"#{r.dense_rank} ({r.cosine:.3f})"
            click.echo(f"        BM25 {bm25}   dense {dense}")


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


@cli.command(short_help="Revert the last change.")
@scope_option(PROJECT, writes=True)
@click.option("--force", is_flag=True, help="Revert even a memory changed by hand since.")
@pass_ctx
def undo(c: Ctx, scope: str, force: bool) -> None:
    """Revert the last change (an extraction, a consolidation, an add…) of the project's
    store, or of the user's with --scope user. A memory changed by hand since is not
    reverted over that change without --force."""
    from .undo import undo as undo_last

    store = c.store if scope == PROJECT else c.scopes(require=False).writable(scope)
    target, _ = undo_last(store, force=force)
    names = ", ".join(ch["name"] for ch in target.changes) or "nothing"
    where = "" if scope == PROJECT else f" in the {scope} store"
    click.echo(f"Reverted {target.source} {target.id}{where} ({names}).")


@cli.command(short_help="What changed, when and why.")
@click.option("-n", "limit", default=20, show_default=True, type=click.IntRange(1, 100000),
              help="How many of the latest operations.")
@scope_option("all")
@json_option
@pass_ctx
def log(c: Ctx, limit: int, scope: str, as_json: bool) -> None:
    """What changed, when and why: the latest operations, newest last."""
    scopes = c.scopes(scope)
    # within one second, each store's own order (its log is appended in order)
    ranked = sorted(((op.time, n, i, op, sc.name)
                     for n, (sc, st) in enumerate(s for s in scopes.stores() if s[0].writable)
                     for i, op in enumerate(st.log(limit))), key=lambda t: t[:3])
    ops = [(op, name) for *_, op, name in ranked][-limit:]
    several = len({sc for _, sc in ops}) > 1
    if as_json:
        emit_json([{**op.to_dict(), "scope": sc} for op, sc in ops])
        return
    if not ops:
        click.echo("No changes recorded yet.")
    for op, sc in ops:
        where = f"[{sc}]  " if several else ""
        click.echo(f"{op.time}  {where}{op.id}  {op.source}"
                   + (f" — {for_terminal(op.summary)}" if op.summary else ""))
        for ch in op.changes:
            why = f" ({for_terminal(ch['reason'])})" if ch.get("reason") else ""
            click.echo(f"    {ch['action']:<6} {ch['name']}{why}")


@cli.command(short_help="Where each store is, its size, and what may be written.")
@json_option
@pass_ctx
def scopes(c: Ctx, as_json: bool) -> None:
    """The stores this folder sees: the project's, the user's own, and the shared read-only
    ones (read_only in config.toml, --also)."""
    try:
        project: MemoryStore | None = c.store
    except MemdirError:
        project = None
    from .scopes import Scopes

    if project is not None:
        found = Scopes(c.config, project=project, also=c.also, watch=False)
    else:
        found = Scopes(c.config, also=c.also, watch=False, scopes=[USER, "shared"])
    rows: list[dict[str, Any]] = []
    if project is None:
        rows.append({"scope": PROJECT, "path": str(c.config.dir.absolute()), "memories": None,
                     "writable": True, "exists": False})
    for sc in found.scopes:
        rows.append({"scope": sc.name, "path": str(sc.root.absolute()),
                     "memories": len(sc.store) if sc.store is not None else 0,
                     "writable": sc.writable,
                     "exists": sc.store is not None})
    if as_json:
        emit_json(rows)
        return
    width = max(len(r["scope"]) for r in rows)
    for r in rows:
        state = ("not created yet" if not r["exists"]
                 else plural(r["memories"], "memory", "memories"))
        mode = "read-write" if r["writable"] else "read-only"
        click.echo(f"{pad(r['scope'], width)}  {mode:<10}  {state:<16}  {r['path']}")


def _register_optional() -> None:
    """Commands defined in their own modules (imported here, cheaply: no SDKs)."""
    from . import cli_hooks, cli_llm, cli_trust

    for command in (*cli_llm.COMMANDS, *cli_hooks.COMMANDS, *cli_trust.COMMANDS):
        cli.add_command(command)


GLOBAL_OPTIONS = {"--dir", "--provider", "--model", "--memory-model", "--timeout",
                  "--max-retries", "--also"}


def hoist_global_options(args: list[str]) -> list[str]:
    """Move global options written after the command (``memdir list --dir X``) in front of
    it, where click looks for them. Arguments after ``--`` are left alone."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    seen_command = False
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        name = arg.split("=", 1)[0]
        if seen_command and name in GLOBAL_OPTIONS:
            if "=" in arg or i + 1 >= len(args):
                front.append(arg)
            else:
                front += [arg, args[i + 1]]
                i += 1
        elif not seen_command and name in GLOBAL_OPTIONS:
            front.append(arg)
            if "=" not in arg and i + 1 < len(args):
                front.append(args[i + 1])
                i += 1
        else:
            if not arg.startswith("-"):
                seen_command = True
            (rest if seen_command else front).append(arg)
        i += 1
    return front + rest


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, rendering errors as one line."""
    _register_optional()
    args = hoist_global_options(list(sys.argv[1:] if argv is None else argv))
    try:
        cli.main(args=args, prog_name="memdir", standalone_mode=False)
    except BrokenPipeError:
        sys.exit(0)
    except click.exceptions.NoArgsIsHelpError as exc:  # `memdir` alone: show the help
        click.echo(exc.ctx.get_help() if exc.ctx else "see 'memdir --help'")
        sys.exit(0)
    except click.UsageError as exc:
        hint = f" — see 'memdir {exc.ctx.info_name} --help'" if exc.ctx else ""
        if exc.ctx and exc.ctx.info_name == "memdir":
            hint = " — see 'memdir --help'"
        click.echo(f"memdir: error: {exc.format_message()}{hint}", err=True)
        sys.exit(2)
    except MemdirError as exc:
        if "--json" in args:
            emit_json({"error": str(exc), "kind": type(exc).__name__})
        click.echo(f"memdir: error: {exc}", err=True)
        sys.exit(1)
    except click.ClickException as exc:  # e.g. the editor could not be started
        click.echo(f"memdir: error: {exc.format_message()}", err=True)
        sys.exit(1)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        click.echo(f"memdir: error: {exc.strerror or exc}{where} — check the path and its"
                   " permissions", err=True)
        sys.exit(1)
    except click.Abort:
        click.echo("memdir: aborted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("memdir: interrupted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
