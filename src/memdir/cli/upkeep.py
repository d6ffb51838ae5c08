"""``memdir index``, ``doctor`` and ``scopes``: the stores' health, and where they are; and
``memdir work`` (hidden; started detached by ``jobs.enqueue``), the store's one background
worker: every queued job, oldest first — learn from a host's session, embed what is not
embedded yet, sync, finish what an exiting agent handed over — below the user's own work in
priority, each failure logged once for ``memdir doctor``.
This module does NOT queue jobs (hooks and commands do, through ``jobs``) and does NOT change
memory files (``doctor --fix`` only repairs what is derived, and
adopts notes without frontmatter).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

import click

from .. import jobs
from ..config import Config, load_config
from ..gate.safetext import pad, plural
from ..scopes import PROJECT, USER
from ..store import Store
from .context import (
    Ctx,
    emit_json,
    existing_store,
    json_option,
    pass_ctx,
    scope_option,
)  # fmt: skip


@click.command(short_help="Bring MEMORY.md and the store's index up to date, and embed all.")
@scope_option(PROJECT, writes=True)
@click.option(
    "--print", "show", is_flag=True, help="Print MEMORY.md as rendered now; change nothing."
)
@json_option
@pass_ctx
def index(c: Ctx, scope: str, show: bool, as_json: bool) -> None:
    """Bring MEMORY.md and the store's index up to date with the files of the project's store
    (or the user's, with --scope user): every file memdir has not seen is read and indexed,
    with a progress bar on a terminal (the one-off of a large folder of new files). Then embed
    every memory for search by meaning now (searches otherwise do it a few seconds at a time,
    and the store's worker in the background)."""
    store = existing_store(c, scope)
    if show:
        from ..entry import render

        click.echo(render(store.entries(), store.config.types), nl=False)
        return
    store.refresh()
    count = len(store)
    from .context import _Progress

    progress = _Progress("Embedding memories for search") if sys.stderr.isatty() else None
    try:
        embedded = store.index.embed_all(progress)
    finally:
        if progress is not None:
            progress.close()
    if as_json:
        emit_json({"index": str(store.index_path), "memories": count, "embedded": embedded})
    else:
        click.echo(
            f"Indexed {count} memories in {store.index_path}"
            + (f"; {embedded} embedded for search by meaning." if embedded else ".")
        )


ONE_BY_ONE = 5  # rules from elsewhere doctor names one by one on a terminal; more: one line


@click.command(short_help="Check the store and report problems.")
@click.option("--fix", is_flag=True, help="Repair what can be repaired (never memory files).")
@scope_option(PROJECT, writes=True)
@json_option
@pass_ctx
def doctor(c: Ctx, fix: bool, scope: str, as_json: bool) -> None:
    """Check the project's store (or the user's, with --scope user): invalid files,
    rule-bending memories, stale index."""
    from ..doctor import diagnose

    if (
        scope == PROJECT
        and c.store_or_none() is None
        and c.config.dir_source
        not in (
            "flag",
            "env",
        )
    ):
        scope = USER  # no project store here: the person's own, as list and scopes show
        click.echo("No project store here; checking your own store.", err=True)
    store = existing_store(c, scope)
    report = diagnose(store, fix=fix)
    from ..standing import waiting

    rules = waiting(store)
    if len(rules) > ONE_BY_ONE and not as_json:  # (a cloned repository's hundreds: one line)
        shown = ", ".join(name for name, _ in rules[:3])
        report.warnings.append(
            {
                "file": ".",
                "reason": f"{len(rules)} rules from elsewhere ({shown} and"
                f" {len(rules) - 3} more) are not your instructions and do not stand until you"
                " accept them: 'memdir review' lists them with where each came from, 'memdir"
                " accept --all' shows each and asks you (never one that orders the agent about)",
            }
        )
        rules = []
    for name, origin in rules:
        report.warnings.append(
            {
                "file": f"{name}.md" if (store.root / f"{name}.md").is_file() else name,
                "reason": f"a rule from elsewhere (from: {origin}) that is not your instruction"
                f" and does not stand until you accept it: 'memdir show {name}', then"
                f" 'memdir accept {name}'",
            }
        )
    _hook_report(store, report, c.config.dir.absolute().parent)
    if scope == PROJECT and c.config.ignored:
        from ..config import untrusted_reason

        report.warnings.append(
            {
                "file": str(c.config.config_file),
                "reason": untrusted_reason(c.config),
            }
        )
    if as_json:
        emit_json(report.to_dict())
    else:
        for line in report.lines():
            click.echo(line)
    if report.errors:
        sys.exit(1)


def _resident_report(report: Any) -> None:
    """Where the resident listens when its usual folder is taken, and its last failures."""
    from ..hookclient import folder, usual_folder
    from ..integrations.resident import failures

    where = folder()
    if where != usual_folder():
        report.warnings.append(
            {
                "file": usual_folder(),
                "reason": "not yours alone (another user's, or open to others): never used;"
                f" the resident listens in {where} instead — remove it if it is stale",
            }
        )
    for line in failures(Path(where), last=3):
        report.notes.append(f"resident: {line}")


def _worker_report(store: Store, report: Any) -> None:
    """What the store's worker has queued, and the last jobs that failed."""
    from .. import jobs

    waiting = jobs.queued(store.internal, running=True)
    if waiting:
        at = "at work" if jobs.at_work(store.internal) else "not at work"
        report.notes.append(f"worker: {len(waiting)} jobs queued ({at})")
    for failed in jobs.failures(store.internal, 3):
        report.warnings.append(
            {
                "file": str(store.internal / jobs.FAILURES),
                "reason": f"a {failed.get('kind')} job failed at {failed.get('time')}:"
                f" {failed.get('error')}",
            }
        )


def _hook_report(store: Store, report: Any, project: Path) -> None:
    """Which host hooks are installed (for everyone, and in the ``project`` folder), and how
    the store's last learn ended."""
    from ..integrations.hooks import installed
    from ..integrations.workerjobs import NO_MODEL, last_learn

    places = installed(project)
    report.hooks = places
    if places:
        report.notes.append("hooks installed: " + "; ".join(places))
    _resident_report(report)
    _worker_report(store, report)
    last = last_learn(store.root)
    if last is not None:
        how = (
            "ok" if last.get("status") == "ok" else f"failed: {last.get('error', 'unknown error')}"
        )
        saved = [str(n) for n in last.get("saved") or []]
        if saved:
            how += f"; saved {', '.join(saved[:5])}" + (" …" if len(saved) > 5 else "")
        for run in last.get("consolidated") or []:
            merged, retired = run.get("merged", 0), run.get("retired", 0)
            how += (
                f"; consolidated {Path(str(run.get('store', ''))).name or 'a store'}:"
                f" {merged} merged, {retired} retired"
                + (" (each with its reason in 'memdir log')" if merged or retired else "")
            )
        if last.get("note"):
            how += f"; {last.get('note')}"
        report.notes.append(f"last learn hook: {last.get('time')} ({last.get('host')}) {how}")
        if str(last.get("note") or "").startswith(NO_MODEL):
            report.warnings.append(
                {"file": str(store.internal / "hooks.jsonl"), "reason": str(last.get("note"))}
            )
        if last.get("status") != "ok":
            report.warnings.append(
                {
                    "file": str(store.internal / "hooks.jsonl"),
                    "reason": f"the last learn hook failed: {last.get('error')}",
                }
            )


@click.command(short_help="Where each store is, its size, and what may be written.")
@json_option
@pass_ctx
def scopes(c: Ctx, as_json: bool) -> None:
    """The stores this folder sees: the project's, the user's own, and the shared read-only
    ones (read_only in config.toml, --also)."""
    project = c.store_or_none()
    from ..scopes import Scopes

    if project is not None:
        found = Scopes(c.config, project=project, also=c.also, watch=False)
    else:
        found = Scopes(c.config, also=c.also, watch=False, scopes=[USER, "shared"])
    rows: list[dict[str, Any]] = []
    if project is None:
        rows.append(
            {
                "scope": PROJECT,
                "path": str(c.config.dir.absolute()),
                "memories": None,
                "writable": True,
                "exists": False,
            }
        )
    for sc in found.scopes:
        rows.append(
            {
                "scope": sc.name,
                "path": sc.store.location if sc.store is not None else str(sc.root.absolute()),
                "memories": len(sc.store) if sc.store is not None else 0,
                "writable": sc.writable,
                "exists": sc.store is not None,
            }
        )
    if as_json:
        emit_json(rows)
        return
    width = max(len(r["scope"]) for r in rows)
    for r in rows:
        state = (
            "not created yet" if not r["exists"] else plural(r["memories"], "memory", "memories")
        )
        mode = "read-write" if r["writable"] else "read-only"
        click.echo(f"{pad(r['scope'], width)}  {mode:<10}  {state:<16}  {r['path']}")


NICE = 5  # the worker's priority at least this far below the user's


@click.command("work", hidden=True)
@click.option("--all", "every", is_flag=True, help="Be the user's worker: every store's jobs.")
@pass_ctx
def work_cmd(c: Ctx, every: bool) -> None:
    """Run the jobs queued for this store, or (--all) for every store of the user's (started
    detached by hooks and commands)."""
    from ..disk.layout import state_dir

    with contextlib.suppress(OSError):  # below the user's work (the resident's share, if more)
        os.nice(max(0, NICE - os.nice(0)))
    if every:
        jobs.work_all(lambda state, root: _handlers(load_config({"dir": root})))
        return
    config = c.config
    # (a folder's queue is known without opening the store: at 100,000 memories that takes
    # seconds, which an index job spends once itself)
    folder = None if config.database_url else state_dir(config.dir)
    if folder is not None and jobs.at_work(folder):
        return  # the store's worker takes the queue: this one leaves before opening the store
    jobs.work(folder or c.store.internal, _handlers(config))


def _handlers(config: Config) -> dict[str, jobs.Handler]:
    """What the jobs of the store ``config`` opens do (``workerjobs.job_handlers``)."""
    from ..integrations.workerjobs import job_handlers

    return job_handlers(config)


COMMANDS = [index, doctor, scopes, work_cmd]
