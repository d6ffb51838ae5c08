"""Consolidation with a real model: what it proposes for a store of distinct, look-alike facts
with a few true duplicates, what memdir applies, and what each would lose.

The store: per-service facts that share their wording but not their specifics (schema names,
ports, owners, flags: the issue's 24 database facts became one generalisation), true duplicate
pairs (the same fact said twice), and unrelated notes. One pass over the whole store
(`consolidate --all`, dry run) with the configured model; its raw answers are kept, so the
baseline in the same run is exactly the model's plan applied as it came (what consolidation did
before memdir checked merges), and memdir's is the validated plan.

    OPENAI_BASE_URL=http://127.0.0.1:8088/v1 OPENAI_API_KEY=local MEMDIR_PROVIDER=openai \\
    MEMDIR_MODEL=qwen2.5-coder-1.5b python benchmarks/consolidate_model_bench.py
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from memdir import MemoryStore
from memdir.config import load_config
from memdir.learn.consolidate import consolidate_memories
from memdir.learn.mergecheck import lost_in_merge
from memdir.memory import Memory
from memdir.providers import Reply, make_model

SERVICES = {"auth": 59, "billing": 79, "search": 12, "reports": 33, "gateway": 41, "ledger": 8}
DUPLICATES = [
    ("use-pnpm", "Use pnpm, never npm", "pnpm-only", "Always pnpm instead of npm"),
    ("tabs-indent", "Indent with tabs", "indent-tabs", "Use tabs for indentation"),
    ("pytest-runner", "Run tests with pytest", "tests-pytest", "Tests are run with pytest"),
    ("deploy-friday", "No deploys on Fridays", "friday-freeze", "Never deploy on a Friday"),
    ("british-spelling", "Answer in British English", "uk-english", "Use British spelling"),
]


class Recording:
    """The model, with every raw answer kept."""

    def __init__(self, model: Any) -> None:
        self.model, self.provider, self.name = model, model.provider, model.model
        self.answers: list[str] = []
        self.seconds = 0.0

    @property
    def model_name(self) -> str:
        return self.name

    def complete(self, **kw: Any) -> Reply:
        began = time.monotonic()
        reply = self.model.complete(**kw)
        self.seconds += time.monotonic() - began
        self.answers.append(reply.text)
        return reply


def build(store: MemoryStore) -> None:
    for svc, n in SERVICES.items():
        facts = [
            (f"{svc}-db", f"The {svc} service's database uses schema {svc}_{n}",
             f"Migrations for {svc} live in services/{svc}/migrations (schema {svc}_{n})."),
            (f"{svc}-port", f"The {svc} service listens on port {8000 + n}",
             f"Locally {svc} runs on 127.0.0.1:{8000 + n}."),
            (f"{svc}-owner", f"The {svc} service is owned by team-{svc}",
             f"Page team-{svc} (@{svc}-oncall) for {svc} incidents."),
            (f"{svc}-flag", f"The {svc} feature flag {svc}_v{n % 5 + 2} is on in staging",
             f"{svc}_v{n % 5 + 2} stays off in production until sign-off."),
        ]  # fmt: skip
        for name, description, body in facts:
            store.write(name, type="project_fact", description=description, body=body)
    for a, da, b, db in DUPLICATES:
        store.write(a, type="user_preference", description=da, body=da + ".")
        store.write(b, type="user_preference", description=db, body=db + ".")


def answers(texts: list[str]) -> list[dict[str, Any]]:
    """The JSON object of each raw model answer that has one."""
    out = []
    for text in texts:
        try:
            data = json.loads(text[text.index("{") : text.rindex("}") + 1])
        except ValueError:
            continue
        if isinstance(data, dict):
            out.append(data)
    return out


def main() -> None:
    config = load_config()
    model = Recording(make_model(config, memory=True))
    root = Path(tempfile.mkdtemp()) / ".memory"
    store = MemoryStore(root, config.__class__(**{**config.__dict__, "dir": root}))
    build(store)
    before = {e.name: store.get(e.name) for e in store.entries()}
    began = time.monotonic()
    plan = consolidate_memories(store, model, whole=True, dry_run=True)  # type: ignore[arg-type]
    wall = time.monotonic() - began

    raw_lost: list[str] = []
    raw_dupes = 0
    parsed = answers(model.answers)
    proposed = [m for a in parsed for m in a.get("merge", []) if isinstance(m, dict)]
    pairs = {frozenset((a, b)) for a, _, b, _ in DUPLICATES}
    for merge in proposed:
        sources = [before[n] for n in merge.get("from") or [] if n in before]
        into = merge.get("into") or {}
        if not sources or not isinstance(into, dict):
            continue
        text = f"{into.get('description', '')} {into.get('body', '')}"
        made = Memory("x", "project_fact", text[:200] or "x", text or "x")
        raw_lost += lost_in_merge(sources, made)
        raw_dupes += any(frozenset(p) <= {s.name for s in sources} for p in pairs)
    kept_lost: list[str] = []
    kept_dupes = 0
    for merge in plan.merges:
        kept_lost += lost_in_merge([before[n] for n in merge.sources], merge.into)
        kept_dupes += any(frozenset(p) <= set(merge.sources) for p in pairs)
    refused = [d for d in plan.dropped if d.startswith("merge")]
    print(f"model {model.name}; {len(before)} memories ({len(SERVICES) * 4} look-alike service")
    print(f"facts, {len(DUPLICATES)} duplicate pairs); one whole-store pass, dry run")
    print(
        f"model calls {len(model.answers)}, model time {model.seconds:.0f} s, wall {wall:.0f} s\n"
    )
    print("| | merges | duplicate pairs merged | specifics lost | retirements |")
    print("|---|---:|---:|---:|---:|")
    print(f"| the model's plan as it came (baseline) | {len(proposed)} | {raw_dupes} |"
          f" {len(raw_lost)} | {sum(len(a.get('retire', [])) for a in parsed)} |")  # fmt: skip
    print(f"| memdir's plan (checked) | {len(plan.merges)} | {kept_dupes} | {len(kept_lost)} |"
          f" {len(plan.retires)} |")  # fmt: skip
    print("\nwhat memdir's plan does:")
    for merge in plan.merges:
        print(f"- merge {', '.join(merge.sources)} into {merge.into.name}:"
              f" {merge.into.description[:80]!r}")  # fmt: skip
    for name, why in plan.retires:
        print(f"- retire {name}: {why[:100]}")
    print(f"\nrefused merges ({len(refused)}):")
    for line in refused[:12]:
        print(f"- {line[:160]}")
    if raw_lost:
        print(f"\nwhat the raw plan would have lost (first 12): {sorted(set(raw_lost))[:12]}")


if __name__ == "__main__":
    main()
