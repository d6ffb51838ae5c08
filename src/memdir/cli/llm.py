"""Commands that may talk to a language model; ``cli`` adds ``COMMANDS`` to the main group.

SDKs are imported inside the commands (through ``providers.make_model``), never when this
module is imported, so ``memdir list`` stays fast.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..disk.layout import USAGE
from ..errors import MemdirError
from ..store import readable
from ..usage import UsageLog
from .context import Ctx, build_model, emit_json, json_option, pass_ctx, read_given

if TYPE_CHECKING:
    from ..providers import ChatModel, Message
    from ..store import Store


def read_messages(text: tuple[str, ...], messages_file: Path | None) -> list[Message]:
    """Messages from a file (JSON list or JSONL, as ``extract`` takes), from TEXT, or from
    stdin; one clear error otherwise."""
    if messages_file is not None:
        return read_transcript(messages_file)
    words = " ".join(text)
    if not words and not sys.stdin.isatty():
        words = sys.stdin.read()
    if not words.strip():
        raise click.UsageError("give TEXT, pipe it on stdin, or pass --messages FILE")
    return [{"role": "user", "content": words.strip()}]


def read_transcript(path: Path) -> list[Message]:
    """Messages from a JSON list, or a JSONL transcript as coding agents write them ('-' reads
    stdin)."""
    text = read_given(path)
    try:
        data = json.loads(text)
        rows = data if isinstance(data, list) else [data]
    except ValueError:
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError:
                raise MemdirError(
                    f"{path}:{n} is not JSON — pass a JSON list of messages or a JSONL transcript"
                ) from None
    return _messages(rows, path)


def _messages(rows: list[Any], path: Path) -> list[Message]:
    """The user and assistant messages of parsed rows; an error when there are none."""
    from ..integrations.transcripts import message_from_row

    messages = [m for m in map(message_from_row, rows) if m is not None]
    if not messages:
        raise MemdirError(
            f"{path} holds no user or assistant messages — pass a JSON list of"
            " {role, content} objects or a JSONL transcript"
        )
    return messages


def _json_list(path: Path) -> list[Any] | None:
    """The rows of a regular file that is one JSON list (not JSON lines); None otherwise. A
    pipe or a device is left to the session reader, which refuses it without blocking."""
    try:
        if not path.is_file():
            return None
        with open(path, "rb") as fh:
            if fh.read(64).lstrip()[:1] != b"[":
                return None
            fh.seek(0)
            data = json.loads(fh.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, list) else None


def read_session_file(path: Path) -> list[Message]:
    """A conversation from a host's session file or memdir's own formats."""
    if str(path) != "-":
        rows = _json_list(path)  # one message a line is still one JSON list
        if rows is not None:
            return _messages(rows, path)
        from ..integrations.transcripts import read_session

        messages = read_session(path)
        if messages:
            return messages
    return read_transcript(path)


def plan_lines(store: Store, plan: Any) -> list[str]:
    """A consolidation plan as a readable diff."""
    lines = []
    for m in plan.merges:
        lines.append(f"merge {' + '.join(m.sources)} -> {m.into.name}")
        for src in m.sources:
            old = readable(store, src)
            lines.append(f"  - {src}: {old.description}" if old else f"  - {src}")
        lines.append(f"  + {m.into.name} ({m.into.type}): {m.into.description}")
        lines += [f"  +   {line}" for line in m.into.body.splitlines()]
    for name, why in plan.retires:
        lines.append(f"retire {name} — {why}")
    lines += [f"(ignored from the model's answer: {d})" for d in plan.dropped]
    return lines


def optional_model(c: Ctx) -> ChatModel | None:
    """The memory model, or None when no LLM is configured (recall then uses search)."""
    from ..errors import LLMUnavailable

    try:
        return build_model(c, memory=True)
    except LLMUnavailable:
        return None


@click.group("llm")
def llm() -> None:
    """Language-model configuration."""


@llm.command("check", short_help="One tiny request: provider, model, latency.")
@click.option("--memory", "memory", is_flag=True, help="Check the memory model instead.")
@json_option
@pass_ctx
def llm_check(c: Ctx, memory: bool, as_json: bool) -> None:
    """Send one tiny request and report provider, model, latency and tokens."""
    model = build_model(c, memory=memory)
    start = time.perf_counter()
    reply = model.complete(
        system="You are a connectivity check.",
        purpose="check",
        messages=[{"role": "user", "content": "Reply with the word: ok"}],
        max_tokens=16,
    )
    latency = (time.perf_counter() - start) * 1000
    data = {
        "provider": model.provider,
        "model": reply.model or model.model,
        "latency_ms": round(latency),
        "input_tokens": reply.usage.input_tokens,
        "output_tokens": reply.usage.output_tokens,
        "reply": reply.text.strip(),
    }
    if as_json:
        emit_json(data)
        return
    click.echo(
        f"provider: {data['provider']}\nmodel: {data['model']}\n"
        f"latency: {data['latency_ms']} ms\n"
        f"tokens: {data['input_tokens']} in, {data['output_tokens']} out\n"
        f"reply: {data['reply']}"
    )


@click.command("recall", short_help="Print what would be injected for TEXT.")
@click.argument("text", nargs=-1)
@click.option(
    "--messages",
    "messages_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A JSON list of messages (Anthropic format) instead of TEXT.",
)
@click.option("--no-llm", is_flag=True, help="Select with search only.")
@click.option("--explain", is_flag=True, help="Show candidates, scores and the path taken.")
@click.option("-k", "max_items", type=click.IntRange(1, 50), help="At most this many.")
@click.option(
    "--as-of",
    "as_of",
    metavar="DATE",
    help="What the memories said then (2026-11-02, a UTC time, 'last week'), from history (BM25).",
)
@json_option
@pass_ctx
def recall(
    c: Ctx,
    text: tuple[str, ...],
    messages_file: Path | None,
    no_llm: bool,
    explain: bool,
    max_items: int | None,
    as_of: str | None,
    as_json: bool,
) -> None:
    """Print the <relevant_memories> block that would be injected for TEXT (or stdin).
    With --as-of, the block of what the memories said at that time; a period the text names
    ("last week") counts back from then."""
    from ..recall import estimate_tokens, render_block, select

    messages = read_messages(text, messages_file)
    if as_of is not None:
        _recall_as_of(c, messages, as_of, max_items or c.config.recall_max_items, as_json)
        return
    model = None if no_llm else optional_model(c)
    scopes = c.scopes()
    sel = select(scopes, messages, model, max_items=max_items or c.config.recall_max_items)
    if no_llm:  # (what the floor said stays: why nothing, or less, was injected)
        why = sel.note.removeprefix("no model configured").lstrip("; ")
        sel.note = "; ".join(filter(None, ["--no-llm", why]))
    block = render_block(scopes, sel.names, c.config.recall_token_budget, sel.episodes)
    tokens = estimate_tokens(block)
    if as_json:
        emit_json({**sel.to_dict(), "block": block, "tokens": tokens})
        return
    if explain:
        from ..find.asked import explain as weighs
        from ..recall import search_query

        click.echo(f"path: {sel.path}" + (f" ({sel.note})" if sel.note else ""))
        click.echo(f"injected: {tokens} tokens")
        for line in weighs(search_query(messages)):
            click.echo(line)
        for name, score in sel.candidates:
            mark = "*" if name in sel.names else " "
            shown = "" if score is None else f"{score:7.2f}  "
            click.echo(f" {mark} {shown}{name}")
        click.echo("")
    click.echo(block or "(no relevant memories)")


def _recall_as_of(c: Ctx, messages: list[Message], as_of: str, k: int, as_json: bool) -> None:
    from .. import wings
    from ..recall import estimate_tokens, search_query

    recall_at = wings.need("memdir.asof", "recall")
    when, names, block = recall_at(
        c.scopes(), search_query(messages), as_of, k, c.config.recall_token_budget
    )
    if as_json:
        emit_json(
            {"as_of": when, "selected": names, "block": block, "tokens": estimate_tokens(block)}
        )
        return
    click.echo(block or f"(no relevant memories as of {when})")


@click.command("extract", short_help="Learn memories from a conversation file.")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Show what would be saved; change nothing.")
@click.option("--said-at", help="When the conversation took place (ISO date), if not today.")
@json_option
@pass_ctx
def extract(c: Ctx, file: Path, dry_run: bool, said_at: str | None, as_json: bool) -> None:
    """Learn memories from a conversation: a JSON list of messages or a JSONL transcript
    (Claude Code's and Codex's session files too); '-' reads stdin."""
    from ..learn.extract import extract_memories

    c.create_store = True
    messages = read_session_file(file)
    user = c.user_store_for_learning()
    result = extract_memories(
        c.store,
        messages,
        build_model(c, memory=True),
        apply=not dry_run,
        user_store=user,
        said_at=said_at,
    )
    changes = [("project", ch) for ch in result.changes] + [
        ("user", ch) for ch in result.user_changes
    ]
    if as_json:
        emit_json(
            {
                "changes": [{**ch.memory.to_dict(), "scope": scope} for scope, ch in changes],
                "retired": [
                    {"name": r.name, "reason": r.reason, "scope": scope}
                    for scope, rs in (("project", result.retired), ("user", result.user_retired))
                    for r in rs
                ],
                "dropped": result.dropped,
                "new_messages": result.new_messages,
                "operation": result.operation.id if result.operation else None,
                "user_operation": (result.user_operation.id if result.user_operation else None),
            }
        )
        return
    if result.new_messages == 0:
        click.echo("Nothing new in this conversation since the last extraction.")
        return
    if not changes:
        click.echo("Nothing worth remembering.")
    applied = {
        (scope, c["name"])
        for scope, op in (("project", result.operation), ("user", result.user_operation))
        if op is not None
        for c in op.changes
    }
    for scope, ch in changes:
        where = " in the user store" if scope == "user" else ""
        verb = "Would save" if dry_run else "Saved"
        if not dry_run and (scope, ch.memory.name) not in applied:
            verb = "Waiting for your review:"  # queued (review = "ask", or held)
        click.echo(f"{verb} {ch.memory.name}{where} ({ch.memory.type}): {ch.memory.description}")
    for scope, gone in [("project", r) for r in result.retired] + [
        ("user", r) for r in result.user_retired
    ]:
        where = " in the user store" if scope == "user" else ""
        verb = "Would retire" if dry_run else "Retired"
        click.echo(f"{verb} {gone.name}{where}: {gone.reason} (kept in history)")
    if result.proposals and not dry_run:
        click.echo(
            "Approve or reject with 'memdir review' (or 'memdir ui'); nothing waiting is"
            " recalled until then."
        )
    if result.operation:
        click.echo("Undo with 'memdir undo'.")
    if result.user_operation:
        click.echo("Undo the user store's part with 'memdir undo --scope user'.")


@click.command("consolidate", short_help="Merge duplicates and retire stale memories.")
@click.option("--dry-run", is_flag=True, help="Show the plan; change nothing.")
@click.option("--force", is_flag=True, help="Allow retiring more than the configured share.")
@click.option("--yes", "-y", is_flag=True, help="Apply without asking (asked only on a terminal).")
@click.option(
    "--all",
    "whole",
    is_flag=True,
    help="Look at every memory, not only those changed since the last run.",
)
@click.option(
    "--scope",
    type=click.Choice(["project", "user"]),
    default="project",
    show_default=True,
    help="Which store: scopes are never merged together.",
)
@json_option
@pass_ctx
def consolidate(
    c: Ctx, dry_run: bool, force: bool, yes: bool, whole: bool, scope: str, as_json: bool
) -> None:
    """Merge duplicate memories and retire stale ones (asks the memory model).

    Without --all, only memories created or changed since the last run are looked at,
    each with its nearest neighbours, within the configured number of model calls. On a
    terminal the plan is shown and applied only once you say yes (--yes skips the question)."""
    from ..learn.consolidate import apply_plan, consolidate_memories

    def progress(done: int, total: int, calls: int) -> None:
        if sys.stderr.isatty():
            click.echo(
                f"\rconsolidating: batch {done} of {total}, {calls} model calls",
                err=True,
                nl=done == total,
            )

    store = c.store if scope == "project" else c.scopes(require=False).writable(scope)
    ask = not (dry_run or yes or as_json) and sys.stdin.isatty() and sys.stdout.isatty()
    plan = consolidate_memories(
        store,
        build_model(c, memory=True),
        force=force,
        dry_run=dry_run or ask,
        whole=whole,
        progress=progress,
    )
    if as_json:
        emit_json(plan.to_dict())
        return
    for line in plan_lines(store, plan):
        click.echo(line)
    if plan.is_empty():
        click.echo("Nothing to consolidate.")
    if ask:
        if not plan.is_empty() and not click.confirm("Apply this plan?", default=False):
            click.echo("Nothing changed.")
            return
        plan = apply_plan(store, plan)
    if plan.left:
        click.echo(
            f"{len(plan.left)} changed memories are left for the next run (the"
            " call budget ran out); 'memdir consolidate --all' looks at everything."
        )
    elif dry_run:
        click.echo("Dry run: nothing changed. Run without --dry-run to apply.")
    elif not plan.is_empty():
        click.echo("Applied. Undo with 'memdir undo'.")


@llm.command("stats", short_help="Model usage per purpose.")
@json_option
@pass_ctx
def stats(c: Ctx, as_json: bool) -> None:
    """Model usage per purpose (memory operations next to the agent's own calls)."""
    totals = UsageLog(c.store.internal / USAGE).totals()
    if as_json:
        emit_json([t.to_dict() for t in totals])
        return
    if not totals:
        click.echo("No model calls recorded yet.")
        return
    click.echo(
        f"{'purpose':<12} {'calls':>6} {'failed':>6} {'tokens in':>10}"
        f" {'tokens out':>10} {'avg ms':>8}"
    )
    for t in totals:
        click.echo(
            f"{t.purpose:<12} {t.calls:>6} {t.failures:>6} {t.input_tokens:>10}"
            f" {t.output_tokens:>10} {t.latency_ms / max(1, t.calls):>8.0f}"
        )
    total_in = sum(t.input_tokens for t in totals)
    total_out = sum(t.output_tokens for t in totals)
    memory_share = sum(
        t.input_tokens + t.output_tokens for t in totals if t.purpose not in ("agent", "check")
    )
    share = memory_share / max(1, total_in + total_out)
    click.echo(
        f"{'total':<12} {sum(t.calls for t in totals):>6}"
        f" {sum(t.failures for t in totals):>6} {total_in:>10} {total_out:>10}"
    )
    click.echo(f"memory operations: {share:.0%} of all tokens")


COMMANDS = [llm, recall, extract, consolidate]
