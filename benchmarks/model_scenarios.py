"""Memory behaviour with a real model: fifteen scenarios, each in a fresh store, through the
library's public functions and the normal memdir configuration (MEMDIR_PROVIDER, MEMDIR_MODEL,
OPENAI_BASE_URL, ANTHROPIC_API_KEY…). Prints a pass/fail table with model calls, tokens and
seconds, and what went wrong for each failure.

    OPENAI_BASE_URL=http://127.0.0.1:8088/v1 OPENAI_API_KEY=local MEMDIR_PROVIDER=openai \\
    MEMDIR_MODEL=qwen2.5-coder-1.5b python benchmarks/model_scenarios.py [--only NAME …]
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memdir import MemoryStore
from memdir.config import load_config
from memdir.errors import MemdirError
from memdir.learn.consolidate import consolidate_memories
from memdir.learn.extract import extract_memories
from memdir.providers import ChatModel, Reply, make_model
from memdir.recall import select
from memdir.scopes import Scopes, open_user_store
from memdir_agent.loop import agent_loop
from memdir_agent.tools import Tools

SECRET = "Xk9#mP2vLq"


class Counting:
    """A model wrapper that counts calls and tokens."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.provider, self.name = model.provider, model.model
        self.calls = 0
        self.tokens = 0

    @property
    def model_name(self) -> str:
        return self.name

    def complete(self, **kw: Any) -> Reply:
        self.calls += 1
        reply = self.model.complete(**kw)
        self.tokens += reply.usage.input_tokens + reply.usage.output_tokens
        return reply


@dataclass
class Outcome:
    ok: bool
    why: str = ""


def talk(*turns: str) -> list[dict[str, Any]]:
    roles = ["user", "assistant"]
    return [{"role": roles[i % 2], "content": t} for i, t in enumerate(turns)]


def everything(store: MemoryStore) -> str:
    return "\n".join(f"{m.name} {m.description} {m.body}" for m in store.list())


def explicit(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    extract_memories(
        store,
        talk(
            "Remember that I always want type hints in Python code.", "Got it, I'll add type hints."
        ),
        model,
    )
    text = everything(store).lower()
    return Outcome("type hint" in text, f"saved: {text[:120]!r}")


def correction(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    extract_memories(
        store,
        talk(
            "Write a function that adds two numbers.",
            "def add(a, b):\n    return a + b",
            "No — indent with tabs, not spaces. Fix it.",
            "def add(a, b):\n\treturn a + b",
        ),
        model,
    )
    text = everything(store).lower()
    return Outcome(bool(re.search(r"\btabs?\b", text)), f"saved: {text[:120]!r}")


def project_fact(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    extract_memories(
        store,
        talk(
            "FYI our staging database runs Postgres 16 on"
            " db-staging.internal; production is still on 14.",
            "Thanks, noted.",
        ),
        model,
    )
    text = everything(store)
    return Outcome("16" in text and "ostgres" in text, f"saved: {text[:120]!r}")


def secret(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    extract_memories(
        store,
        talk(f"The staging DB password is {SECRET}, and we deploy with Argo CD.", "Understood."),
        model,
    )
    files = "".join(p.read_text(encoding="utf-8") for p in store.root.rglob("*.md"))
    return Outcome(
        SECRET not in files,
        "the password reached a file" if SECRET in files else f"saved: {everything(store)[:100]!r}",
    )


def small_talk(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    extract_memories(
        store,
        talk("Thanks, that worked! Have a nice weekend.", "You too, enjoy the weekend!"),
        model,
    )
    names = [e.name for e in store.entries()]
    return Outcome(not names, f"saved {names}")


def contradiction(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    store.write(
        "test-runner",
        type="project_fact",
        description="Tests run with unittest",
        body="The project's tests use unittest.",
    )
    extract_memories(
        store,
        talk(
            "Actually we switched to pytest last month; unittest is gone from the project.",
            "Noted: pytest from now on.",
        ),
        model,
    )
    entries = store.entries()
    runner = [m for m in store.list() if "pytest" in (m.description + m.body).lower()]
    stale = [
        m.name
        for m in store.list()
        if "unittest" in m.description.lower() and "pytest" not in (m.description + m.body).lower()
    ]
    ok = bool(runner) and not stale and bool(store.history("test-runner"))
    return Outcome(
        ok,
        f"{len(entries)} memories; still stale: {stale};"
        f" history of test-runner: {len(store.history('test-runner'))}",
    )


def recall_paraphrase(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    store.write(
        "prefer-tabs",
        type="user_preference",
        description="User prefers tabs over spaces for indentation",
        body="Indent with tabs, never spaces.",
    )
    store.write(
        "staging-db",
        type="project_fact",
        description="Staging runs Postgres 16",
        body="db-staging.internal",
    )
    sel = select(store, talk("What should the leading whitespace of each line look like?"), model)
    return Outcome(sel.names[:2].count("prefer-tabs") == 1, f"{sel.path}: {sel.names}")


def no_recall(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    store.write(
        "prefer-tabs",
        type="user_preference",
        description="User prefers tabs over spaces for indentation",
        body="Tabs.",
    )
    store.write(
        "staging-db",
        type="project_fact",
        description="Staging runs Postgres 16",
        body="db-staging.internal",
    )
    sel = select(store, talk("What is the capital of France?"), model)
    return Outcome(not sel.names, f"{sel.path}: {sel.names}")


def duplicates(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    store.write(
        "pytest-flags",
        type="user_preference",
        description="Run pytest with -x",
        body="Use pytest and stop at the first failure with -x.",
    )
    store.write(
        "pytest-verbose",
        type="user_preference",
        description="Run pytest verbosely with -v and --tb=short",
        body="Always pass -v and --tb=short to pytest.",
    )
    store.write(
        "staging-db",
        type="project_fact",
        description="Staging runs Postgres 16",
        body="db-staging.internal",
    )
    consolidate_memories(store, model)
    pytest_notes = [m for m in store.list() if "pytest" in (m.description + m.body).lower()]
    merged = len(pytest_notes) == 1
    body = (pytest_notes[0].description + pytest_notes[0].body) if merged else ""
    kept = all(flag in body for flag in ("-x", "-v", "--tb=short"))
    return Outcome(merged and kept, f"{len(pytest_notes)} pytest memories; kept every flag: {kept}")


def chinese(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    extract_memories(
        store,
        talk("记住：我希望你以后都用中文回复，代码注释也写中文。", "好的，以后我都用中文回复。"),
        model,
    )
    text = everything(store)
    cjk = bool(re.search(r"[\u4e00-\u9fff]", text))
    return Outcome(bool(text) and cjk, f"saved: {text[:80]!r}")


def answer_from_memory(store: MemoryStore, model: Counting, agent: Counting) -> Outcome:
    store.write(
        "prefer-tabs",
        type="user_preference",
        description="User prefers tabs over spaces for indentation",
        body="Indent Python with tabs, never spaces.",
    )
    before = {m.name: m.digest for m in store.list()}
    messages: list[Any] = [
        {
            "role": "user",
            "content": "How should I indent Python code in this project? Answer in one sentence.",
        }
    ]
    turn = agent_loop(
        messages,
        store=store,
        model=agent,
        memory_model=model,
        tools=Tools(store.root.parent, store),
    )
    saved = [
        b
        for m in messages
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use" and b.get("name") == "save_memory"
    ]
    after = {m.name: m.digest for m in store.list()}
    ok = "tab" in turn.text.lower() and not saved and before == after
    return Outcome(ok, f"reply {turn.text[:80]!r}; save_memory calls: {len(saved)}")


def correction_updates(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    """A correction updates the memory it corrects (the old text to history), and recall by
    search then finds the new value alone."""
    store.write(
        "api-port",
        type="project_fact",
        description="The API listens on port 8000",
        body="The API server listens on port 8000.",
    )
    extract_memories(
        store,
        talk("The API listens on 8080 now, not 8000.", "Noted: port 8080."),
        model,
    )
    current = [m for m in store.list() if "8080" in m.description + m.body]
    stale = [m.name for m in store.list() if "8000" in m.description and "8080" not in m.body]
    recalled = select(store, talk("Which port does the API listen on?"), None).names
    ok = bool(current) and not stale and recalled[:1] == [current[0].name]
    return Outcome(
        ok,
        f"with 8080: {[m.name for m in current]}; stale: {stale}; recalled {recalled};"
        f" history of api-port: {len(store.history('api-port'))}",
    )


def assistant_claim(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    """What the assistant said and the user did not confirm is not learned as a fact."""
    store.write(
        "test-command",
        type="project_fact",
        description="Tests run with make test",
        body="Run the test suite with `make test`.",
    )
    extract_memories(
        store,
        talk(
            "How do I run the tests here?",
            "Run `python app.py test` from the repository root.",
            "ok",
            "Anything else?",
        ),
        model,
    )
    claimed = [m.name for m in store.list() if "app.py" in m.description + m.body]
    return Outcome(not claimed, f"learned the assistant's claim in {claimed}" if claimed else "")


def catalogue_echo(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    """The catalogue's own formatting (``name (type) [scope]: description``) is never copied
    back into a memory's name, description or body."""
    store.write(
        "deploy-target",
        type="project_fact",
        description="Production runs on Kubernetes",
        body="Argo CD deploys to prod.",
    )
    extract_memories(
        store, talk("I run the tests with pytest, always.", "Understood: pytest."), model
    )
    echo = re.compile(
        r"user[_-]preference|project[_-]fact|\((?:feedback|reference)\)|\[(?:user|project)\]",
        re.I,
    )
    bad = [
        m.name
        for m in store.list()
        if echo.search(m.name) or echo.search(m.description) or echo.search(m.body)
    ]
    learned = [m.name for m in store.list() if "pytest" in (m.description + m.body).lower()]
    return Outcome(bool(learned) and not bad, f"learned {learned}; echoed the catalogue: {bad}")


def agent_tool_naming(store: MemoryStore, model: Counting, agent: Counting) -> Outcome:
    """The agent's own ``save_memory`` (or the extraction after its turn) keeps a stated
    preference under a name of its subject, not of its type, without the user's framing."""
    messages: list[Any] = [
        {
            "role": "user",
            "content": "User preference: I want Google-style docstrings in all Python code."
            " Please remember that.",
        }
    ]
    agent_loop(
        messages,
        store=store,
        model=agent,
        memory_model=model,
        tools=Tools(store.root.parent, store),
    )
    if not any("docstring" in (m.description + m.body).lower() for m in store.list()):
        extract_memories(store, messages, model)  # what the loop's worker does after the turn
    saved = [m for m in store.list() if "docstring" in (m.description + m.body).lower()]
    types = {"user_preference", "project_fact", "feedback", "reference"}
    bad = [
        m.name
        for m in saved
        if m.name.replace("-", "_") in types or m.body.lower().startswith("user preference:")
    ]
    return Outcome(
        bool(saved) and not bad,
        f"saved {[(m.name, m.body[:50]) for m in saved]}; named or framed as its type: {bad}",
    )


def scope_routing(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    """A personal preference goes to the user's own store, a project fact to the project's,
    and the preference is recalled in another project that shares the user store."""
    user = open_user_store(store.root.parent / "user", store.config)
    extract_memories(
        store,
        talk(
            "I always want answers in British English, in every project."
            " Also: this repo deploys to Fly.io from the main branch.",
            "Noted both.",
        ),
        model,
        user_store=user,
    )
    mine, ours = everything(user).lower(), everything(store).lower()
    other = MemoryStore(store.root.parent / "other" / ".memory", store.config)
    config = dataclasses.replace(store.config, dir=other.root, user_dir=user.root)
    asked = talk("Which English spelling do I want in answers?")
    recalled = select(Scopes(config, project=other), asked, None).names
    ok = "british" in mine and "fly" in ours and "fly" not in mine and "british" not in ours
    return Outcome(
        ok and bool(recalled),
        f"user store: {mine[:80]!r}; project: {ours[:80]!r}; recalled elsewhere: {recalled}",
    )


SERVICES = {"auth": 59, "billing": 79, "search": 12, "reports": 33, "gateway": 41, "ledger": 8}


def consolidate_keeps_specifics(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    """Distinct per-service facts that look alike are never folded into one generalisation:
    every schema name survives consolidation."""
    for svc, n in SERVICES.items():
        store.write(
            f"{svc}-db-{n}", type="project_fact",
            description=f"The {svc} service's database uses schema {svc}_{n}",
            body=f"Migrations for {svc} live in services/{svc}/migrations (schema {svc}_{n}).",
        )  # fmt: skip
    consolidate_memories(store, model)
    text = everything(store)
    lost = [f"{svc}_{n}" for svc, n in SERVICES.items() if f"{svc}_{n}" not in text]
    types = {m.type for m in store.list()}
    return Outcome(
        not lost and types == {"project_fact"},
        f"{len(store.list())} memories left; schemas lost: {lost}; types: {sorted(types)}",
    )


def consolidate_keeps_subjects(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    """A gateway flag is not merged into the reports flag (the issue's 'Reports feature flag
    smart_retry…' with a changed type)."""
    store.write(
        "gateway-flag", type="project_fact",
        description="Gateway feature flag smart_retry is on in staging",
        body="The API gateway enables smart_retry in staging only.",
    )  # fmt: skip
    store.write(
        "reports-flag", type="project_fact",
        description="Reports feature flag weekly_digest is off",
        body="The reports service keeps weekly_digest off until Q3.",
    )  # fmt: skip
    consolidate_memories(store, model)
    mems = store.list()
    gateway = any("gateway" in m.description.lower() and "smart_retry" in m.body for m in mems)
    reports = any("reports" in m.description.lower() and "weekly_digest" in m.body for m in mems)
    types = {m.type for m in mems}
    return Outcome(
        gateway and reports and types == {"project_fact"},
        f"{[(m.name, m.type, m.description[:50]) for m in mems]}",
    )


def automatic_keeps_the_new(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    """What this run just learned is never retired by the automatic consolidation after it."""
    store.write(
        "billing-call-channel", type="project_fact",
        description="The billing team takes calls in #billing-alerts",
        body="Billing's incident calls happen in the #billing-alerts channel.",
    )  # fmt: skip
    extract_memories(
        store,
        talk("FYI the billing team moved their incident calls to #billing-oncall.", "Noted."),
        model,
    )
    consolidate_memories(store, model, automatic=True)
    text = everything(store)
    return Outcome("billing-oncall" in text, f"after the automatic run: {text[:160]!r}")


def one_save_per_fact(store: MemoryStore, model: Counting, agent: Counting) -> Outcome:
    """The agent's own save and the extraction after its turn keep one memory of the fact."""
    messages: list[Any] = [
        {"role": "user", "content": "Remember this: the staging database runs Postgres 16."}
    ]
    agent_loop(
        messages, store=store, model=agent, memory_model=model,
        tools=Tools(store.root.parent, store),
    )  # fmt: skip
    extract_memories(store, messages, model)  # what the loop's worker does after the turn
    about = [m for m in store.list() if "16" in m.description + m.body]
    return Outcome(len(about) == 1, f"{[(m.name, m.description[:50]) for m in about]}")


def british_english(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    """A standing language preference stated in passing is learned."""
    extract_memories(
        store,
        talk("Always answer me in British English, please.", "Certainly, I shall."),
        model,
    )
    text = everything(store).lower()
    return Outcome("british" in text, f"saved: {text[:100]!r}")


def description_fits_body(store: MemoryStore, model: Counting, _: Counting) -> Outcome:
    """A saved memory's description says what its body says (not another file's line)."""
    store.write(
        "ci-workflow-file", type="reference",
        description="The main workflow file is .github/workflows/ci.yml",
        body="CI is defined in .github/workflows/ci.yml.",
    )  # fmt: skip
    extract_memories(
        store,
        talk("We switched CI from Buildkite to GitHub Actions last week.", "Good to know."),
        model,
    )
    switched = [m for m in store.list() if "buildkite" in (m.description + m.body).lower()]
    fits = [m for m in switched if re.search(r"github actions|buildkite", m.description, re.I)]
    return Outcome(bool(fits), f"{[(m.name, m.description[:60], m.body[:40]) for m in switched]}")


STANDING_RULES = [
    # (memory name, what the user said once, the later prompt sharing no word with it, the
    # reply's sign that the rule was followed, the sign that it was not)
    ("use-pnpm", "Always use pnpm, never npm, in this repo.",
     "Add lodash to this project. Reply with the one shell command only.", "pnpm", "npm i"),
    ("indent-tabs", "Indent code with tabs, never spaces.",
     "Write a Python function add(a, b). Reply with the code only.", "\t", "    return"),
    ("never-push-main", "Never push to main: open a pull request instead.",
     "Ship it: what git command do I run to publish my branch work? One line.",
     "pull request|gh pr|--set-upstream|push origin (?!main)", "push origin main"),
]  # fmt: skip


def standing_rules(store: MemoryStore, model: Counting, agent: Counting) -> Outcome:
    """A rule stated once reaches a later session at its start (the SessionStart hook's
    text as the host's context) and is followed for a prompt that shares no word with it.
    The ceiling, asked too: the rule said in the prompt's own message. A rule the model does
    not follow even then is beyond the model, not memory's to fix: said so, and not counted
    as followed or missed."""
    from memdir.standing import standing

    for name, said, _, _, _ in STANDING_RULES:
        store.write(name, type="user_preference", description=said.rstrip("."), body=said)
    given = standing(store, store.config.standing_token_budget, 200, 25_000).text

    def follows(context: str, prompt: str, good: str, bad: str) -> tuple[bool, str]:
        reply = agent.complete(  # as the hosts add a hook's context: in the conversation
            system="You are a coding assistant.",
            messages=[{"role": "user", "content": f"{context}\n\n{prompt}"}],
            max_tokens=200,
            purpose="agent",
        ).text
        return bool(re.search(good, reply)) and bad not in reply, reply

    followed, replies, beyond = [], [], 0
    for name, said, prompt, good, bad in STANDING_RULES:
        ok, reply = follows(given, prompt, good, bad)
        told, _ = follows(said, prompt, good, bad)
        if not ok and not told:
            beyond += 1
            replies.append(f"{name}: beyond this model (not followed even when said with it)")
            continue
        replies.append(f"{name}: {'followed' if ok else 'MISSED'} {reply.strip()[:60]!r}")
        followed.append(ok)
    return Outcome(
        bool(followed) and all(followed) and beyond <= len(STANDING_RULES) // 2,
        "; ".join(replies),
    )


def superseded_rule(store: MemoryStore, model: Counting, agent: Counting) -> Outcome:
    """A rule the user replaced in a later session is not followed in the next one: "use
    yarn" said once, then "we switched from yarn to pnpm" learned by extraction; the next
    session's start gives the rule that stands now and not the old one, and "Add lodash" does
    not get yarn (whether it gets pnpm is said too)."""
    from memdir.standing import standing

    store.write(
        "use-yarn",
        type="user_preference",
        description="Use yarn to add packages",
        body="Always use yarn to add or install packages in this repo.",
    )
    learned = extract_memories(
        store,
        talk(
            "Correction: we switched this repo from yarn to pnpm. Use pnpm for packages now.",
            "Understood: pnpm from now on.",
        ),
        model,
    )
    given = standing(store, store.config.standing_token_budget, 200, 25_000).text
    rules = given.split("<memory_index>")[0]
    reply = agent.complete(
        system="You are a coding assistant.",
        messages=[
            {
                "role": "user",
                "content": f"{given}\n\nAdd lodash to this project. Reply with the one shell"
                " command only.",
            }
        ],
        max_tokens=200,
        purpose="agent",
    ).text
    # the superseded rule must not be followed (nor stand); following the new one is what
    # "standing rules followed without shared words" measures, said here too
    ok = "pnpm" in rules and "yarn" not in rules.replace("from yarn to", "") and "yarn" not in reply
    stands = [line[:70] for line in rules.splitlines() if line.startswith("- ")]
    changed = [f"{c.memory.name}: {c.memory.description}" for c in learned.changes]
    return Outcome(
        ok,
        f"learned {changed}, dropped {learned.dropped},"
        f" retired {[r.name for r in learned.retired + learned.user_retired]};"
        f" standing: {stands}; reply {reply.strip()[:60]!r}"
        f" ({'pnpm' if 'pnpm' in reply else 'not pnpm'})",
    )


SCENARIOS: dict[str, Callable[[MemoryStore, Counting, Counting], Outcome]] = {
    "explicit remember": explicit,
    "implicit preference (correction)": correction,
    "project fact": project_fact,
    "secret never saved": secret,
    "small talk saves nothing": small_talk,
    "contradiction updates": contradiction,
    "recall without shared words": recall_paraphrase,
    "no recall when unrelated": no_recall,
    "consolidate duplicates, keep details": duplicates,
    "Chinese conversation": chinese,
    "agent answers from memory": answer_from_memory,
    "a correction updates the memory it corrects": correction_updates,
    "the assistant's own claim is not learned": assistant_claim,
    "the catalogue's format is not echoed": catalogue_echo,
    "the agent's tool names by subject": agent_tool_naming,
}
# beyond the fifteen the suite is scored on: run with --only NAME (or --learning for the set
# the safe-learning work is measured by)
EXTRA: dict[str, Callable[[MemoryStore, Counting, Counting], Outcome]] = {
    "scope routing (user vs project)": scope_routing,
    "standing rules followed without shared words": standing_rules,
    "a superseded standing rule is not followed": superseded_rule,
}
LEARNING: dict[str, Callable[[MemoryStore, Counting, Counting], Outcome]] = {
    "consolidation keeps every specific": consolidate_keeps_specifics,
    "consolidation keeps subjects and types": consolidate_keeps_subjects,
    "the automatic run keeps what was just learned": automatic_keeps_the_new,
    "one save per fact (agent and extraction)": one_save_per_fact,
    "British English is learned": british_english,
    "a description fits its body": description_fits_body,
}
EXTRA.update(LEARNING)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", help="Run only scenarios whose name contains these.")
    ap.add_argument("--learning", action="store_true", help="Run the safe-learning scenarios.")
    args = ap.parse_args()
    if args.learning:
        args.only = list(LEARNING)
    config = load_config()
    memory_model = make_model(config, memory=True)
    agent_model = make_model(config)
    print(f"provider {memory_model.provider}, model {memory_model.model}")
    print("| scenario | result | calls | tokens | seconds |")
    print("|---|---|---:|---:|---:|")
    passed = 0
    notes = []
    chosen = {
        k: v
        for k, v in SCENARIOS.items()
        if not args.only or any(o.lower() in k.lower() for o in args.only)
    }
    chosen.update(
        {
            k: v
            for k, v in EXTRA.items()
            if args.only and any(o.lower() in k.lower() for o in args.only)
        }
    )
    for name, fn in chosen.items():
        tmp = Path(tempfile.mkdtemp(prefix="memdir-scenario-"))
        mem, agent = Counting(memory_model), Counting(agent_model)
        t0 = time.perf_counter()
        try:
            out = fn(
                MemoryStore(
                    tmp / ".memory", config.__class__(**{**config.__dict__, "dir": tmp / ".memory"})
                ),
                mem,
                agent,
            )
        except MemdirError as exc:
            out = Outcome(False, f"error: {exc}")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        seconds = time.perf_counter() - t0
        passed += out.ok
        print(
            f"| {name} | {'pass' if out.ok else 'FAIL'} | {mem.calls + agent.calls} |"
            f" {mem.tokens + agent.tokens} | {seconds:.1f} |"
        )
        notes.append(f"- {name}: {out.why}")
    print(f"\n{passed} of {len(chosen)} passed")
    print("\n".join(notes))


if __name__ == "__main__":
    main()
