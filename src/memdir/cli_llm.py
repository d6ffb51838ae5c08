"""Commands that may talk to a language model, registered on the main group.

SDKs are imported inside the commands (through ``providers.make_model``), never when this
module is imported, so ``memdir list`` stays fast.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import click

from .usage import UsageLog

if TYPE_CHECKING:
    from .cli import Ctx
    from .providers import ChatModel


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def build_model(c: Ctx, *, memory: bool) -> ChatModel:
    """The configured model (memory model if ``memory``), logging usage into the store."""
    from .providers import make_model

    return make_model(c.config, memory=memory, usage_log=c.store.internal / "usage.jsonl")


def register(group: click.Group) -> None:
    """Add the LLM-backed commands to ``group``."""
    from .cli import json_option, pass_ctx

    @group.group("llm")
    def llm() -> None:
        """Language-model configuration."""

    @llm.command("check")
    @click.option("--memory", "memory", is_flag=True, help="Check the memory model instead.")
    @json_option
    @pass_ctx
    def llm_check(c: Ctx, memory: bool, as_json: bool) -> None:
        """Send one tiny request and report provider, model, latency and tokens."""
        model = build_model(c, memory=memory)
        start = time.perf_counter()
        reply = model.complete(system="You are a connectivity check.", purpose="check",
                               messages=[{"role": "user", "content": "Reply with the word: ok"}],
                               max_tokens=16)
        latency = (time.perf_counter() - start) * 1000
        data = {"provider": model.provider, "model": reply.model or model.model,
                "latency_ms": round(latency), "input_tokens": reply.usage.input_tokens,
                "output_tokens": reply.usage.output_tokens, "reply": reply.text.strip()}
        if as_json:
            emit_json(data)
            return
        click.echo(f"provider: {data['provider']}\nmodel: {data['model']}\n"
                   f"latency: {data['latency_ms']} ms\n"
                   f"tokens: {data['input_tokens']} in, {data['output_tokens']} out\n"
                   f"reply: {data['reply']}")

    @group.command("stats")
    @json_option
    @pass_ctx
    def stats(c: Ctx, as_json: bool) -> None:
        """Model usage per purpose (memory operations next to the agent's own calls)."""
        totals = UsageLog(c.store.internal / "usage.jsonl").totals()
        if as_json:
            emit_json([t.to_dict() for t in totals])
            return
        if not totals:
            click.echo("No model calls recorded yet.")
            return
        click.echo(f"{'purpose':<12} {'calls':>6} {'failed':>6} {'tokens in':>10}"
                   f" {'tokens out':>10} {'avg ms':>8}")
        for t in totals:
            click.echo(f"{t.purpose:<12} {t.calls:>6} {t.failures:>6} {t.input_tokens:>10}"
                       f" {t.output_tokens:>10} {t.latency_ms / max(1, t.calls):>8.0f}")
        total_in = sum(t.input_tokens for t in totals)
        total_out = sum(t.output_tokens for t in totals)
        memory_share = sum(t.input_tokens + t.output_tokens for t in totals
                           if t.purpose not in ("agent", "check"))
        share = memory_share / max(1, total_in + total_out)
        click.echo(f"{'total':<12} {sum(t.calls for t in totals):>6}"
                   f" {sum(t.failures for t in totals):>6} {total_in:>10} {total_out:>10}")
        click.echo(f"memory operations: {share:.0%} of all tokens")
