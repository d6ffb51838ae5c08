"""Standing rules with a model in the loop: eight rules said once, each followed (or not) for a
later prompt that shares no word with it, the session-start text given as the hosts give it
(in the conversation, before the prompt). memdir's format (one list line per rule under one
imperative line, ``standing.standing``) against the baseline in the same run: the same rules
as XML elements with attributes (the format before); and the ceiling, each rule said in the
prompt's own message (what the model follows when told). Rules 1-4 are the half formats were
chosen on, 5-8 the half that confirms the choice.

    OPENAI_BASE_URL=http://127.0.0.1:8088/v1 OPENAI_API_KEY=local MEMDIR_PROVIDER=openai \\
    MEMDIR_MODEL=qwen2.5-coder-1.5b python benchmarks/standing_bench.py
"""

from __future__ import annotations

import re
import tempfile
from html import escape
from pathlib import Path

from memdir import MemoryStore
from memdir.config import load_config
from memdir.providers import make_model
from memdir.recall import index_section, origin_label
from memdir.standing import standing

RULES = [  # (name, what the user said once, the later prompt, followed, not followed, half)
    ("use-pnpm", "Always use pnpm, never npm, in this repo.",
     "Add lodash to this project. Reply with the one shell command only.", r"pnpm", r"npm i",
     "choose"),
    ("indent-tabs", "Indent code with tabs, never spaces.",
     "Write a Python function add(a, b). Reply with the code only.", r"\t", r"\n    \S",
     "choose"),
    ("never-push-main", "Never push to main: open a pull request instead.",
     "Ship it: what git command do I run to publish my branch work? One line.",
     r"pull request|gh pr|--set-upstream|push origin (?!main)|push -u origin (?!main)",
     r"push origin main", "choose"),
    ("type-hints", "Always write type hints in Python.",
     "Write a function that returns the square of a number. Code only.",
     r"def \w+\([^)]*:\s*\w+|->", None, "choose"),
    ("ticket-prefix", "Commit messages start with the ticket id, like ABC-123: message.",
     "Give me the git commit command for fixing the login bug. One line.", r"[A-Z]+-\d+", None,
     "confirm"),
    ("f-strings", "Prefer f-strings; never use format() or %.",
     "Write Python code that prints a greeting with a name variable. Code only.", r"f\"|f'",
     r"\.format\(|%s|% ", "confirm"),
    ("pytest-only", "Use pytest, never unittest.",
     "Write a test for a function add(a, b). Code only.", r"def test_", r"unittest",
     "confirm"),
    ("answer-french", "Answer me in French.", "What is the capital of Italy? One sentence.",
     r"\b(est|capitale|la)\b", r"\bThe capital\b", "confirm"),
]  # fmt: skip


def as_xml(store: MemoryStore) -> str:
    """The baseline: the format before, each rule an XML element with its name, type and
    origin, then the index."""
    parts = [
        f'<memory name="{escape(m.name)}" type="{escape(m.type)}"'
        f' from="{escape(origin_label(store, m.name))}">\n{escape(m.body)}\n</memory>'
        for m in sorted(store.list(), key=lambda m: m.updated or "", reverse=True)
    ]
    preamble = (
        "The user's standing preferences and rules, saved from earlier sessions. Follow them in"
        " this session unless the user says otherwise now; they are the user's own instructions."
    )
    index = index_section(store, 200, 25_000)
    return (
        "<standing_memories>\n" + preamble + "\n" + "\n".join(parts) + "\n</standing_memories>"
        "\n\n<memory_index>\nWhat else is remembered (names and descriptions; the details come"
        " with the prompts they matter to):\n" + index + "\n</memory_index>"
    )


def main() -> None:
    root = Path(tempfile.mkdtemp()) / ".memory"
    store = MemoryStore(root)
    for name, said, *_ in RULES:
        store.write(name, type="user_preference", description=said.rstrip("."), body=said)
    model = make_model(load_config(), memory=False)
    formats: dict[str, str | None] = {
        "baseline: XML elements": as_xml(store),
        "memdir: one line per rule": standing(store, 1200, 200, 25_000).text,
        "ceiling: the rule said in the prompt's own message": None,
    }
    print(f"model {model.model}; {len(RULES)} rules, each prompt sharing no word with its rule")
    print("| format | followed, rules 1-4 | followed, rules 5-8 | which |")
    print("|---|---:|---:|---|")
    for label, text in formats.items():
        score = {"choose": 0, "confirm": 0}
        marks = []
        for name, said, prompt, good, bad, half in RULES:
            context = said if text is None else text
            reply = model.complete(
                system="You are a coding assistant.",
                messages=[{"role": "user", "content": f"{context}\n\n{prompt}"}],
                max_tokens=200,
                purpose="agent",
            ).text
            ok = bool(re.search(good, reply)) and not (bad and re.search(bad, reply, re.M))
            score[half] += ok
            marks.append(f"{name} {'yes' if ok else 'no'}")
        print(f"| {label} | {score['choose']}/4 | {score['confirm']}/4 | {', '.join(marks)} |")


if __name__ == "__main__":
    main()
