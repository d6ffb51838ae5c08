"""The ``memdir`` command line: parse, call the library, print.

This is the only place errors are rendered (one line on stderr, exit 1; usage errors exit 2).
Commands that need no LLM never import an LLM SDK: model-building code is imported inside
the commands that use it. This module does NOT contain memory logic.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from .. import memory as memfmt
from ..disk.layout import state_dir
from ..errors import InvalidMemory, MemdirError
from ..gate.safetext import plural
from ..plan import Put
from ..scopes import PROJECT, route
from .context import Ctx, emit_json, fail, name_and_version, pass_ctx, read_given, scope_option


class _WithWings(click.Group):
    """The core's commands and the wings' (``memdir.commands``), a wing's loaded only when it
    is asked for or the commands are listed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from .. import wings

        return sorted(set(super().list_commands(ctx)) | set(wings.names("memdir.commands")))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is None:
            from .. import wings

            found = wings.load("memdir.commands", cmd_name)
        return found


@click.group(cls=_WithWings, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--dir",
    "dir_",
    type=click.Path(file_okay=False, path_type=Path),
    help="The memory folder (default ./.memory, or $MEMDIR_DIR).",
)
@click.option(
    "--provider",
    type=click.Choice(["anthropic", "openai", "claude-code", "codex"]),
    help="LLM provider (claude-code and codex run the host's CLI headless).",
)
@click.option("--model", help="Main (agent) model.")
@click.option("--memory-model", help="Cheaper model for memory operations.")
@click.option("--timeout", type=click.FloatRange(min=0.1), help="Seconds per model request.")
@click.option("--max-retries", type=click.IntRange(min=0), help="Retries of a failed request.")
@click.option(
    "--also",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Another store to recall from, read-only (repeatable).",
)
@click.option(
    "--db",
    "database_url",
    metavar="URL",
    help="Keep memories in PostgreSQL (postgresql://…; or $MEMDIR_DATABASE_URL).",
)
@click.option("--store", "store_name", metavar="NAME", help="The store's name in that database.")
@click.version_option(package_name="memdir")
@click.pass_context
def cli(
    ctx: click.Context,
    dir_: Path | None,
    provider: str | None,
    model: str | None,
    memory_model: str | None,
    timeout: float | None,
    max_retries: int | None,
    also: tuple[Path, ...],
    database_url: str | None,
    store_name: str | None,
) -> None:
    """Long-term memory for LLM agents, kept as a folder of Markdown files."""
    ctx.obj = Ctx(
        {
            "dir": dir_,
            "provider": provider,
            "model": model,
            "memory_model": memory_model,
            "timeout": timeout,
            "max_retries": max_retries,
            "also": also,
            "database_url": database_url,
            "store": store_name,
        }
    )


@cli.command()
@click.option(
    "--git",
    "with_git",
    is_flag=True,
    help="Set up merging memories in git (making the folder a repository if it is in none).",
)
@pass_ctx
def init(c: Ctx, with_git: bool) -> None:
    """Create the memory folder and its index."""
    c.create_store = True
    existed = state_dir(c.config.dir).is_dir() or (c.config.dir / "MEMORY.md").is_file()
    if c.config.database_url:
        if with_git:
            raise click.UsageError("--git syncs a folder; a database store is shared already")
        from ..errors import StoreNotFound
        from ..store import open_store

        try:  # the database's own answer: a store another machine made exists already
            open_store(c.config, create=False, watch=False).close()
            existed = True
        except StoreNotFound:
            existed = False
    store = c.store
    verb = "Memory store already exists" if existed else "Created memory store"
    where = store.location if c.config.database_url else store.root
    click.echo(f"{verb} in {where} ({plural(len(store), 'memory', 'memories')}).")
    if with_git:
        from .. import wings

        said = wings.event("init-git", store)
        if not said:
            fail("--git needs memdir's git wing (memdir_git) — reinstall memdir")
        for lines in said:
            for line in lines:
                click.echo(line[0].upper() + line[1:] + ".")


def _read_body(body: str | None, body_file: Path | None) -> str:
    if body is not None and body_file is not None:
        raise click.UsageError("give the body with --body or --body-file, not both")
    if body is not None:
        return body
    if body_file is not None:
        return read_given(body_file)
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
def add(
    c: Ctx,
    name: str,
    type_: str,
    description: str,
    body: str | None,
    body_file: Path | None,
    allow_secret: bool,
    scope: str | None,
) -> None:
    """Create or update the memory NAME (user_preference goes to the user's own store)."""
    text = _read_body(body, body_file)
    scope = route(c.config, type_, scope)
    c.create_store = scope == PROJECT
    store = c.store if scope == PROJECT else c.scopes(require=False).writable(scope)
    existed = name in store
    before = store.get(name).digest if existed else None
    mem = store.write(
        name,
        type=type_,
        description=description,
        body=text,
        source=c.source,
        secrets="allow" if allow_secret else "refuse",
    )
    if existed and mem.digest == before:
        click.echo(f"Unchanged {mem.name}: it already says exactly this.")
        return
    where = "" if scope == PROJECT else f" in the {scope} store"
    place = store.place_of(mem.name)
    path = mem.path if scope == PROJECT and isinstance(place, Path) else place
    click.echo(f"{'Updated' if existed else 'Saved'} {mem.name}{where} ({path}).")


@cli.command(short_help="Rename a memory, or move it to another scope.")
@click.argument("old")
@click.argument("new", required=False)
@click.option(
    "--scope",
    "to",
    type=click.Choice(["project", "user"]),
    help="Move OLD to this scope's store (its history stays where it was).",
)
@pass_ctx
def mv(c: Ctx, old: str, new: str | None, to: str | None) -> None:
    """Rename the memory OLD to NEW (its history moves with it), or move it to another
    scope's store with --scope (mv NAME --scope user; user:NAME names the user's copy)."""
    if to is None:
        if new is None:
            raise click.UsageError("give NEW, or --scope project|user")
        store, old, _ = c.pick(old, write=True)
        mem = store.rename(old, new, source=c.source)
        click.echo(f"Renamed {old} to {mem.name}.")
        return
    _, name, here = c.pick(old, write=True)
    path = c.scopes().move(name, here, to, new=new, source=c.source)
    click.echo(f"Moved {name} from the {here} store to the {to} store ({path}).")


@cli.command(short_help="Pin NAME: first in the index, never auto-changed.")
@click.argument("name")
@scope_option(None, writes=True, holds=True)
@pass_ctx
def pin(c: Ctx, name: str, scope: str | None) -> None:
    """Pin NAME: shown first in the system prompt's index, never changed by extraction or
    consolidation (`pinned: true` in its frontmatter)."""
    store, name, _ = c.pick(name, scope, write=True)
    changed = store.set_pinned(name, True, source=c.source)
    click.echo(f"Pinned {name}." if changed else f"{name} was already pinned; unchanged.")


@cli.command()
@click.argument("name")
@scope_option(None, writes=True, holds=True)
@pass_ctx
def unpin(c: Ctx, name: str, scope: str | None) -> None:
    """Unpin NAME."""
    store, name, _ = c.pick(name, scope, write=True)
    changed = store.set_pinned(name, False, source=c.source)
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
@scope_option(None, writes=True, holds=True)
@pass_ctx
def edit(c: Ctx, name: str, scope: str | None) -> None:
    """Edit the memory NAME in $EDITOR; it is validated before it is saved."""
    store, name, _ = c.pick(name, scope, write=True)
    mem = store.get(name)
    original = store.text(mem.name)
    text = original
    while True:
        edited = click.edit(text, extension=".md", require_save=True)
        if edited is None or edited == original:
            click.echo("No changes.")
            return
        try:
            new = memfmt.loads(edited)
            if new.name != mem.name:
                raise InvalidMemory(f"the name must stay {mem.name!r} — use 'memdir mv' to rename")
            new = memfmt.validate_new(new, store.config.types)
            store.apply(
                [Put(new, reason="edited by hand", expect=mem.digest, merge_extra=False)],
                source="edit",
            )
        except MemdirError as exc:  # invalid, a secret, changed meanwhile: never lose the text
            click.echo(f"memdir: error: {exc}", err=True)
            if sys.stdin.isatty() and click.confirm("Reopen the editor?", default=True):
                text = edited
                continue
            kept = _keep_edit(name, edited)
            fail(
                f"the edit was not saved; your text is in {kept} — fix it and run"
                f" 'memdir edit {name}' again"
            )
        break
    click.echo(f"Saved {mem.name}.")


@cli.command(short_help="Delete the memory NAME (it stays in history; --purge: for good).")
@click.argument("name")
@scope_option(None, writes=True)
@click.option(
    "--purge", is_flag=True, help="Remove it and its history for good (NAME@vN: only that version)."
)
@click.option("--yes", is_flag=True, help="Do not ask before --purge.")
@pass_ctx
def rm(c: Ctx, name: str, scope: str | None, purge: bool, yes: bool) -> None:
    """Delete the memory NAME (it stays in history); without --scope, the first scope that
    holds it (project first). --purge removes it and every kept version for good (a secret
    that reached it), after asking."""
    name, version = name_and_version(name)
    if version is not None and not purge:
        fail("a version is removed only with --purge — 'memdir rm --purge NAME@vN'")
    store, name, where = c.pick(name, scope, write=True)
    if purge:
        what = f"version {version} of {name}" if version else f"{name} and all its history"
        if not yes:
            if not sys.stdin.isatty():
                fail(f"purging {what} cannot be undone — confirm with --yes")
            click.confirm(f"Remove {what} for good? This cannot be undone", abort=True)
        gone = store.purge(name, version, source=c.source)
        click.echo(f"Purged {what} ({plural(gone, 'version', 'versions')} removed).")
        return
    store.delete(name, reason="removed with memdir rm", source=c.source)
    again = f"memdir restore {name}" + ("" if where == PROJECT else f" --scope {where}")
    click.echo(
        f"Deleted {name}{'' if where == PROJECT else f' from the {where} store'};"
        f" '{again}' brings it back."
    )


def _register_optional() -> None:
    """Commands defined in their own modules (imported here, cheaply: no SDKs)."""
    from . import hooks, llm, read, review, trust, upkeep, versions

    for command in (
        *read.COMMANDS,
        *versions.COMMANDS,
        *upkeep.COMMANDS,
        *llm.COMMANDS,
        *hooks.COMMANDS,
        *trust.COMMANDS,
        *review.COMMANDS,
    ):
        cli.add_command(command)


GLOBAL_OPTIONS = {
    "--dir",
    "--provider",
    "--model",
    "--memory-model",
    "--timeout",
    "--max-retries",
    "--also",
}


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
        hint = f" — see '{exc.ctx.command_path} --help'" if exc.ctx else ""
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
        click.echo(
            f"memdir: error: {exc.strerror or exc}{where} — check the path and its permissions",
            err=True,
        )
        sys.exit(1)
    except click.Abort:
        click.echo("memdir: aborted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("memdir: interrupted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
