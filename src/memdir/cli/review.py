"""``memdir review`` (what waits for a person when ``review = "ask"``) and ``memdir
recall-log`` (what was recalled, for which question, and why).

This module does NOT contain the queue's logic (``review`` does).
"""

from __future__ import annotations

import sys

import click

from .. import review as queue
from ..gate.safetext import for_terminal, for_terminal_text
from ..store import Store
from .context import Ctx, emit_json, fail, json_option, pass_ctx


def _stores(c: Ctx) -> list[tuple[str, Store]]:
    return [(sc.name, st) for sc, st in c.scopes(require=False).stores() if not st.read_only]


def _find(c: Ctx, spec: str) -> tuple[str, Store, queue.Proposal, int | None]:
    """The store, proposal and change index (None: all) that ``ID`` or ``ID:N`` names."""
    pid, _, number = spec.partition(":")
    for scope, store in _stores(c):
        proposal = queue.find(store, pid)
        if proposal is None:
            continue
        if number and not number.isdigit():
            fail(f"{spec!r} is not ID or ID:N — 'memdir review' lists them")
        return scope, store, proposal, int(number) - 1 if number else None
    fail(f"no proposal {pid!r} waits for review — 'memdir review' lists them")


@click.group(
    "review", invoke_without_command=True, short_help="Approve or reject what was learned."
)
@json_option
@click.pass_context
def review_group(ctx: click.Context, as_json: bool) -> None:
    """What memdir learned and waits for you (review = "ask" in config.toml): list it, show
    it as diffs, approve or reject each change."""
    if ctx.invoked_subcommand is not None:
        return
    c = ctx.find_object(Ctx)
    assert c is not None
    rows = [(scope, store, p) for scope, store in _stores(c) for p in queue.proposals(store)]
    if as_json:
        emit_json([{**p.to_dict(), "scope": scope} for scope, _, p in rows])
        return
    from ..policy import unlogged_names
    from ..standing import waiting

    scopes = c.scopes(require=False)
    standing = waiting(scopes)
    for name, origin in standing:
        click.echo(
            f"{for_terminal(name)}  from: {for_terminal(origin)}  — not your instruction until"
            f" you accept it: 'memdir show {for_terminal(name)}', then 'memdir accept"
            f" {for_terminal(name)}'"
        )
    listed = {name for name, _ in standing}
    for sc, st in scopes.stores():
        if not sc.writable or st.config.review != "ask":
            continue
        conflicted = {e.name for e in st.entries() if e.conflicted}
        for name in sorted(unlogged_names(st) - listed):
            listed.add(name)
            shown = for_terminal(name)
            click.echo(
                f"{shown}  from: hand  — written outside memdir (a pull, a clone, another"
                " program, an edit): held from recall until you "
                + (
                    f"choose between its two versions: 'memdir resolve {shown} --keep"
                    " current|other'"
                    if name in conflicted
                    else f"accept it: 'memdir accept {shown}'"
                )
            )
    if not rows:
        mode = c.config.review
        if not listed:
            click.echo(
                "Nothing waits for review."
                + ("" if mode == "ask" else ' (review = "auto": what is learned is saved at once)')
            )
        return
    for scope, _, p in rows:
        click.echo(f"{p.id}  {scope}  {p.source}  {p.time}  {for_terminal(p.summary)}")
        for item in p.pending:
            what = "forget" if item.action == "remove" else "save"
            click.echo(f"    {p.id}:{item.index + 1}  {what} {item.name}")


@review_group.command("show")
@click.argument("spec", metavar="ID[:N]")
@json_option
@pass_ctx
def show(c: Ctx, spec: str, as_json: bool) -> None:
    """Each waiting change of proposal ID as a diff against the memory as it is now."""
    scope, store, proposal, index = _find(c, spec)
    items = [i for i in proposal.pending if index is None or i.index == index]
    if as_json:
        emit_json([{**i.__dict__, "diff": queue.diff(store, i), "scope": scope} for i in items])
        return
    for item in items:
        click.echo(f"{proposal.id}:{item.index + 1}  {item.action} {item.name} — {item.reason}")
        click.echo(queue.diff(store, item) or "(no change to the text)")


def _decide(c: Ctx, specs: tuple[str, ...], every: bool, approve: bool) -> None:
    chosen: list[tuple[Store, queue.Proposal, int]] = []
    if every:
        chosen = [
            (st, p, i.index) for _, st in _stores(c) for p in queue.proposals(st) for i in p.pending
        ]
    alone: set[tuple[str, int]] = set()  # changes named on their own (ID:N)
    for spec in specs:
        _, store, proposal, index = _find(c, spec)
        chosen += [(store, proposal, i.index) for i in proposal.pending if index in (None, i.index)]
        if index is not None:
            alone.add((proposal.id, index))
    if not chosen:
        fail("name what to decide: ID, ID:N or --all ('memdir review' lists them)")
    for store, proposal, index in chosen:
        why = queue.order_in(proposal.items[index]) if approve else None
        if why is not None and (proposal.id, index) not in alone:
            click.echo(
                f"Not approved: {proposal.id}:{index + 1} ({proposal.items[index].name}) reads"
                f" as an instruction planted for an agent ({why}) — look at it ('memdir review"
                f" show {proposal.id}'); if it is truly yours, approve it on its own:"
                f" 'memdir review approve {proposal.id}:{index + 1}'"
            )
            continue
        queue.decide(store, proposal.id, index, approve=approve)
        name = proposal.items[index].name
        click.echo(f"{'Approved' if approve else 'Rejected'} {proposal.id}:{index + 1} ({name}).")


@review_group.command("approve")
@click.argument("specs", nargs=-1, metavar="ID[:N]...")
@click.option("--all", "every", is_flag=True, help="Every waiting change.")
@pass_ctx
def approve(c: Ctx, specs: tuple[str, ...], every: bool) -> None:
    """Save the proposed changes (history kept, undo works)."""
    c.users_decision("approving a change")
    _decide(c, specs, every, approve=True)


@review_group.command("reject")
@click.argument("specs", nargs=-1, metavar="ID[:N]...")
@click.option("--all", "every", is_flag=True, help="Every waiting change.")
@pass_ctx
def reject(c: Ctx, specs: tuple[str, ...], every: bool) -> None:
    """Drop the proposed changes (the rejection is logged)."""
    _decide(c, specs, every, approve=False)


@click.command("accept", short_help="Make a rule from elsewhere your own instruction.")
@click.argument("names", nargs=-1, metavar="NAME...")
@click.option("--all", "every", is_flag=True, help="Every memory that waits ('memdir review').")
@click.option("--yes", is_flag=True, help="Accept a text that reads as an order to an agent.")
@pass_ctx
def accept(c: Ctx, names: tuple[str, ...], every: bool, yes: bool) -> None:
    """Accept a preference, feedback or pinned memory that came from elsewhere (a repository,
    a teammate, another agent, a hand edit) as your own instruction: from the next session
    on it stands at session start. The acceptance is for its text as it is now; a later
    change from elsewhere waits again. A text that reads as an instruction planted for an
    agent is accepted only by its name with --yes, never by --all."""
    from ..gate.decisions import active
    from ..gate.instructions import screen
    from ..standing import accept_as_users, waiting

    c.users_decision("accepting a rule as your own")
    scopes = c.scopes()
    chosen = list(names) + ([n for n, _ in waiting(scopes) if n not in names] if every else [])
    if not chosen and every:
        click.echo("Nothing waits: every preference, feedback and pinned memory is yours.")
        return
    if every and not sys.stdin.isatty():
        fail(
            "--all shows each rule and asks you on a terminal — run it in one, or accept"
            " each by its name: memdir accept NAME"
        )
    if not chosen:
        fail("name what to accept: NAME... or --all ('memdir review' lists them)")
    texts = {name: scopes.get(name) for name in chosen}
    for name in names:  # held for review: not recalled, so it could not stand
        scope, real = scopes.locate(name)
        if scope.store is not None and active(scope.root, real, texts[name].digest):
            fail(
                f"{name} is held for review (it came from elsewhere): approve it first"
                " ('memdir review'), then accept it"
            )
    orders = {}
    for name, mem in texts.items():
        why = screen(f"{mem.description}\n{mem.body}")
        if why is not None:
            orders[name] = why
    for name, why in orders.items():
        if name in names and not yes:
            fail(
                f"{name} reads as an instruction planted for an agent ({why}) — look at it"
                f" ('memdir show {name}'); if it is truly yours: 'memdir accept {name} --yes'"
            )
    for name in chosen:
        if name in orders and name not in names:
            click.echo(
                f"Not accepted: {for_terminal(name)} reads as an instruction planted for an agent"
                f" ({orders[name]}) — 'memdir show {for_terminal(name)}'; if it is truly yours,"
                f" 'memdir accept {for_terminal(name)} --yes'"
            )
            continue
        if name not in names:  # (--all: each shown, each asked)
            text = texts[name]
            click.echo(f"{for_terminal(name)}  ({for_terminal(text.type)})")
            click.echo(for_terminal_text(text.body.strip() or text.description))
            if not click.confirm(f"Accept {for_terminal(name)} as your own instruction?"):
                continue
        mem = accept_as_users(scopes, name, texts[name].digest)
        said = for_terminal((mem.body.strip() or mem.description).splitlines()[0][:200])
        click.echo(f"Accepted {for_terminal(name)} as your instruction: {said}")


@click.command("recall-log", short_help="What was recalled, for which question, and why.")
@click.option("-n", "limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--stats", is_flag=True, help="What recall cost, per source, over the whole log.")
@json_option
@pass_ctx
def recall_log(c: Ctx, limit: int, stats: bool, as_json: bool) -> None:
    """What was recalled, newest first: when, from where, the question, which memories,
    why (the model's pick, or search and its scores) and what it cost (tokens, ms)."""
    from ..recalllog import entries

    if stats:
        _recall_costs(c, as_json)
        return
    rows = [e for _, st in _stores(c) for e in entries(st.internal, limit)]
    rows.sort(key=lambda e: e["time"], reverse=True)
    rows = rows[:limit]
    if as_json:
        emit_json(rows)
        return
    if not rows:
        click.echo("No recalls logged yet (recall_log = false turns the log off).")
    for e in rows:
        how = {
            "llm": "model's pick",
            "search": "search",
            "search-fallback": "search (model failed)",
        }
        cost = ", ".join(
            f"{n} {unit}" for n, unit in ((e["tokens"], "tokens"), (e["ms"], "ms")) if n is not None
        )
        click.echo(
            f"{e['time']}  {e['source']}  {how.get(e['path'], e['path'])}"
            + (f"  ({cost})" if cost else "")
        )
        click.echo(f"    asked: {for_terminal(e['question'])[:200]}")
        for m in e["memories"]:
            score = "" if m["score"] is None else f"  score {m['score']:.2f}"
            where = f" [{m['scope']}]" if m["scope"] else ""
            click.echo(f"    - {m['name']}{where}{score}")
        if not e["memories"]:
            click.echo("    (nothing recalled)")


def _recall_costs(c: Ctx, as_json: bool) -> None:
    """Per source (a host's prompts, its session starts, the agent, MCP): how many recalls,
    how many injected something, the tokens they added and the time they took."""
    from ..recalllog import costs, entries

    rows = [e for _, st in _stores(c) for e in entries(st.internal)]
    found = costs(rows)
    if as_json:
        emit_json([x.to_dict() for x in found])
        return
    if not found:
        click.echo("No recalls logged yet (recall_log = false turns the log off).")
        return
    since = min(e["time"] for e in rows)
    click.echo(f"{len(rows)} recalls since {since}")
    click.echo(
        f"{'source':<20} {'recalls':>7} {'injected':>8} {'tokens mean':>11} {'max':>6}"
        f" {'ms p50':>7} {'p95':>6}"
    )

    def cell(value: object, width: int) -> str:
        return f"{'—' if value is None else value:>{width}}"

    for x in found:
        d = x.to_dict()
        click.echo(
            f"{x.source:<20} {x.recalls:>7} {x.injected / x.recalls:>8.0%}"
            f" {cell(d['tokens_mean'], 11)} {cell(d['tokens_max'], 6)}"
            f" {cell(d['ms_p50'], 7)} {cell(d['ms_p95'], 6)}"
        )


COMMANDS = (review_group, accept, recall_log)
