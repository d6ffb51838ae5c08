"""Facts that change, with a model in the loop: project chats where a fact stated in November is
corrected weeks later. Each store starts as such a store is found in use: the old fact saved
twice under two names (what an agent saving it in two sessions leaves). The correction is
learned from its conversation by ``extract_memories``; then recall is asked about the present
(its block must carry the new value and no memory stating only the old one), and ``asof`` is
asked about a day between the two (it must answer with the old value).

    OPENAI_BASE_URL=http://127.0.0.1:8088/v1 OPENAI_API_KEY=local MEMDIR_PROVIDER=openai \\
    MEMDIR_MODEL=qwen2.5-coder-1.5b python benchmarks/supersede_bench.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from memdir import MemoryStore
from memdir.config import load_config
from memdir.learn.extract import extract_memories
from memdir.providers import make_model
from memdir.recall import render_block, select
from memdir_asof.past import moment, search_at

CHAINS = [  # (old saved as, old again, the correction said, present question, old, new, a
    # memory that must stay: near in words or values, but not what the correction replaced)
    ("Staging runs Postgres 16", "The staging database is Postgres 16",
     "Correction: we moved staging from Postgres 16 to 17 last week.",
     "which postgres version does staging run?", "16", "17", "Production runs Postgres 17"),
    ("The API listens on port 8000", "API port is 8000",
     "Heads up, the API listens on port 8080 now, not 8000 anymore.",
     "which port does the api listen on?", "8000", "8080", "Node 16 runs on the build agents"),
    ("CI runs on Jenkins", "Builds use Jenkins",
     "We switched CI from Jenkins to GitHub Actions on Monday.",
     "what do we use for ci builds?", "Jenkins", "GitHub Actions",
     "Jenkins credentials live in Vault"),
    ("Deploys happen on Fridays", "We deploy every Friday",
     "From now on deploys happen on Thursdays instead of Fridays.",
     "which day do we deploy?", "Friday", "Thursday", "Friday lunch is the team's demo slot"),
    ("The project uses Python 3.11", "Python version is 3.11",
     "We upgraded the project from Python 3.11 to 3.12.",
     "which python version does the project use?", "3.11", "3.12",
     "The docs site is built with Python tooling"),
    ("Logs are shipped to Papertrail", "Logging goes to Papertrail",
     "We no longer use Papertrail; logs go to Loki now.",
     "where do the logs go?", "Papertrail", "Loki", "Metrics go to Prometheus"),
]  # fmt: skip
CONFIRM = [  # written after the rules were chosen on CHAINS
    ("The frontend uses React 17", "React version is 17",
     "We upgraded the frontend from React 17 to 18 yesterday.",
     "which react version does the frontend use?", "17", "18", "The admin app stays on Vue 3"),
    ("Code review happens in Gerrit", "Reviews go through Gerrit",
     "We moved code review from Gerrit to GitHub pull requests.",
     "where do code reviews happen?", "Gerrit", "GitHub", "Gerrit had the old review history"),
    ("Staging is in eu-west-1", "The staging region is eu-west-1",
     "Staging is in us-east-2 now, not eu-west-1.", "which region is staging in?", "eu-west-1",
     "us-east-2", "Backups are stored in eu-west-1"),
    ("The team standup is at 9:30", "Standup happens at 9:30",
     "Standup moved to 10:00 instead of 9:30.", "when is standup?", "9:30", "10:00",
     "The weekly planning call is at 9:30 on Mondays"),
]  # fmt: skip

SAID_OLD = "2026-11-02T10:00:00Z"


def _by_hand(root: Path, name: str, description: str) -> None:
    (root / f"{name}.md").write_text(
        f"---\nname: {name}\ntype: project_fact\ndescription: {description}\n"
        f"created: {SAID_OLD}\nupdated: {SAID_OLD}\n---\n{description}.\n",
        encoding="utf-8",
    )


def main() -> None:
    model = make_model(load_config(), memory=True)
    print(f"model {model.model}; facts corrected weeks after they were saved twice")
    for label, chains in (("chosen on", CHAINS), ("confirming", CONFIRM)):
        print(f"\n{label}:")
        run(model, chains)


def run(model: Any, chains: list[tuple[str, ...]]) -> None:
    print("| fact | learned | retired | present recalled alone | as of then | the other stays |")
    print("|---|---|---|---|---|---|")
    present = past = kept = 0
    seconds: list[float] = []
    for first, second, correction, question, old, new, other in chains:
        root = Path(tempfile.mkdtemp()) / ".memory"
        root.mkdir(parents=True)
        _by_hand(root, "fact-a", first)
        _by_hand(root, "fact-b", second)
        _by_hand(root, "other", other)
        store = MemoryStore(root)
        talk = [
            {"role": "user", "content": correction},
            {"role": "assistant", "content": "Noted, thanks."},
        ]
        began = time.monotonic()
        result = extract_memories(store, talk, model)
        seconds.append(time.monotonic() - began)
        learned = "; ".join(c.memory.description for c in result.changes) or "nothing"
        retired = ", ".join(r.name for r in result.retired) or "none"
        picked = select(store, [{"role": "user", "content": question}])
        block = render_block(store, picked.names, 2000, ())
        stale = [
            e.name
            for e in store.entries()
            if e.name in picked.names
            and e.name != "other"  # (a different fact that may well hold the old value)
            and old.lower() in f"{e.description} {store.get(e.name).body}".lower()
            and new.lower() not in f"{e.description} {store.get(e.name).body}".lower()
        ]
        alone = new.lower() in block.lower() and not stale
        then = search_at(store, question, moment("2026-11-15"), 3)
        was = bool(then) and old.lower() in then[0][0].memory.description.lower()
        stays = "other" in store
        present += alone
        past += was
        kept += stays
        print(
            f"| {first} → {new} | {learned[:70]} | {retired} | {'yes' if alone else 'no'} |"
            f" {'yes' if was else 'no'} | {'yes' if stays else 'no'} |"
        )
    n = len(chains)
    print(
        f"present fact recalled alone: {present} of {n}; the old fact as of 15 November:"
        f" {past} of {n}; the memory that must stay stayed: {kept} of {n}; extraction"
        f" {sum(seconds) / n:.1f} s each"
    )


if __name__ == "__main__":
    main()
