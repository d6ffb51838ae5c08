"""The sync commands: ``memdir sync``, ``memdir resolve`` and git's merge driver.

This module does NOT contain sync logic (``sync`` and ``memmerge`` do).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click

from memdir.cli.context import Ctx, emit_json, existing_store, fail, json_option, pass_ctx
from memdir.config import standing_kind
from memdir.errors import MemdirError
from memdir.scopes import PROJECT, USER
from memdir.store import Store


def _store(c: Ctx, scope: str | None, *, create: bool = False) -> tuple[Store, str]:
    """The store to sync: the scope asked for, else the project's if there is one, else the
    user's."""
    if scope is None:
        scope = PROJECT if c.store_or_none() is not None else USER
    if scope == PROJECT and c.config.database_url:
        raise MemdirError(
            "the project's store is in PostgreSQL, shared by every host already — 'memdir"
            " export DIR' writes a copy as files to keep in git"
        )
    if scope == USER and create:
        return c.scopes(require=False).writable(USER), scope
    return existing_store(c, scope), scope


@click.command("sync", short_help="Commit, pull, merge and push the store through git.")
@click.option(
    "--scope",
    type=click.Choice([PROJECT, USER]),
    help="Which store (default: the project's, else yours).",
)
@click.option("--remote", help="The git remote (default: the branch's upstream, else origin).")
@click.option(
    "--init",
    "init_url",
    metavar="URL",
    help="Make the store a git repository syncing with URL first.",
)
@click.option("--no-push", is_flag=True, help="Commit and merge, but do not push.")
@click.option(
    "--skip",
    metavar="COMMIT",
    multiple=True,
    help="Merge the remote without the files sync refused from COMMIT (its id as sync said it).",
)
@click.option(
    "--allow-retire",
    is_flag=True,
    help="Take a remote that retires more memories than a sync takes without asking.",
)
@json_option
@pass_ctx
def sync_command(
    c: Ctx,
    scope: str | None,
    remote: str | None,
    init_url: str | None,
    no_push: bool,
    skip: tuple[str, ...],
    allow_retire: bool,
    as_json: bool,
) -> None:
    """Sync the memory store through git: commit what changed (only the store's folder), fetch,
    merge memories field by field (MEMORY.md is rendered again, never merged), push. A memory
    changed on both sides keeps one version current and the other in history, marked
    conflicted until 'memdir resolve'. What the remote sends is checked first: links,
    anything under .memdir, files that are not memories, oversized files and a mass
    retirement are refused, nothing merged."""
    from memdir.store import as_folder
    from memdir_git import repo as syncrepo
    from memdir_git import run as sync

    if init_url is not None and scope != USER:
        c.create_store = True  # the user's store is created alone: never a .memory here
    store_, scope = _store(c, scope, create=init_url is not None)
    store = as_folder(store_)
    if init_url is not None:
        for line in syncrepo.init(store, init_url, remote=remote or "origin"):
            if not as_json:
                click.echo(line[0].upper() + line[1:] + ".")
    for commit in skip:
        if not (4 <= len(commit) <= 64 and all(ch in "0123456789abcdef" for ch in commit.lower())):
            fail(f"--skip {commit!r}: give the commit id sync named (at least 4 hex digits)")
    let = sync.Let(skip=tuple(s.lower() for s in skip), retire=allow_retire)
    report = sync.sync(
        store,
        remote=remote,
        push=not no_push,
        let=let,
        waiting=lambda: click.echo(
            "Another sync of this store is at work: waiting for it to end (at most"
            f" {sync.WAIT_FOR_SYNC // 60} minutes)…",
            err=True,
        ),
    )
    if report.merged:
        from memdir.standing import waiting

        arrived = set(report.added) | set(report.updated)
        waits = [name for name, _ in waiting(store) if name in arrived]
        if waits:  # (another machine's rules, even the person's own: this machine's word)
            report.notes.append(
                f"Rules that arrived and stand at session start here once you accept them:"
                f" {', '.join(waits)} — 'memdir review', then 'memdir accept NAME' (or --all)"
            )
    if as_json:
        emit_json(dict(dataclasses.asdict(report), scope=scope, store=str(store.root)))
        return
    for line in report.lines():
        click.echo(line)
    if report.offline:
        sys.exit(1)


@click.command(
    "resolve", short_help="Settle a memory two syncs, or git's own merge, left conflicted."
)
@click.argument("name")
@click.option(
    "--keep",
    default="current",
    show_default=True,
    help="current (the text here now; git's HEAD side), other (the version the other side"
    " wrote) or a history version (v3); ours and theirs are the same two.",
)
@click.option("--scope", type=click.Choice([PROJECT, USER]), help="The store that holds NAME.")
@pass_ctx
def resolve_command(c: Ctx, name: str, keep: str, scope: str | None) -> None:
    """Clear the conflict mark of NAME, keeping one version (the other stays in history); a
    file git left its conflict markers in is marked settled for git too (git add). A kept text
    you did not give before stands as your rule only once you accept it."""
    from memdir.store import as_folder
    from memdir_git import repo as syncrepo

    store, real, _ = c.pick(name, scope, write=True)
    what, users = syncrepo.resolve(as_folder(store), real, keep)
    click.echo(f"Resolved {real}: kept {what}.")
    mem = store.get(real)
    if not users and standing_kind(mem.type, mem.pinned):
        click.echo(
            f"It is not a text you gave: it stands as your instruction only once you accept"
            f" it ('memdir show {real}', then 'memdir accept {real}')."
        )


@click.command("merge-file", hidden=True)
@click.option("--index", "is_index", is_flag=True)
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("ours", type=click.Path(path_type=Path))
@click.argument("theirs", type=click.Path(path_type=Path))
@click.argument("path", required=False)
def merge_file(is_index: bool, base: Path, ours: Path, theirs: Path, path: str | None) -> None:
    """git's merge driver for memory files (%O %A %B %P): writes the merge into OURS."""
    from memdir_git.git import Git
    from memdir_git.merge import merge

    if is_index:  # MEMORY.md: ours stands until sync renders it from the merged files
        return

    def read(p: Path) -> str:
        try:
            return p.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"cannot read {p} ({exc})")

    git = Git(Path.cwd())  # git runs a merge driver in the top of the working tree

    def blob_id(text: str) -> str:
        return git.run("hash-object", "-w", "--stdin", input=text.encode()).out.strip()

    base_text = read(base)
    merged = merge(base_text or None, read(ours), read(theirs), ref=blob_id)
    ours.write_bytes(merged.text.encode("utf-8"))


COMMANDS = (sync_command, resolve_command, merge_file)
