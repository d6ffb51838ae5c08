"""``memdir chat`` and ``memdir run``: the agent for people and for scripts.

The chat reads lines with editing and history (readline, when attached to a terminal), streams
replies as they arrive, shows one line when memories were recalled or saved, and offers slash
commands. Ctrl-C stops a running turn without ending the session.
This module does NOT talk to the store except through the library.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from memdir import jobs
from memdir.disk.layout import CHAT_HISTORY, USAGE
from memdir.errors import MemdirError
from memdir.gate.safetext import plural
from memdir.memory import slugify
from memdir.providers import ChatModel, Message
from memdir.scopes import Scopes
from memdir.store import Store
from memdir_agent.loop import Turn, agent_loop
from memdir_agent.permissions import Gate
from memdir_agent.terminal import (
    Spinner,
    confirm,
    prompt_toolkit_reader,
    read_piped,
    typed_so_far,
    use_readline,
)
from memdir_agent.tools import Tools
from memdir_agent.worker import EXIT_WAIT, MemoryWorker, hand_over

HELP = """Commands:
  /memory            list memories
  /remember TEXT     save TEXT to memory now
  /forget NAME       delete a memory (kept in history; 'memdir restore NAME')
  /recall            show what was injected this turn
  /consolidate       merge duplicates and retire stale memories now
  /clear             start a new conversation (memories stay)
  /model             which models answer and tend memory
  /cost              tokens used in this session, per purpose
  /help              this help
  /exit              leave (also Ctrl-D)"""


class Session:
    """One chat or run: the history, the agent's parts, and where output goes."""

    def __init__(
        self,
        store: Store,
        model: ChatModel,
        memory_model: ChatModel | None,
        root: Path,
        out: TextIO = sys.stdout,
        err: TextIO = sys.stderr,
        gate: Gate | None = None,
        scopes: Scopes | None = None,
    ) -> None:
        self.store = store
        self.scopes = scopes  # recall reads them all; the person's memories go to theirs
        self.model = model
        self.memory_model = memory_model
        self.tools = Tools(root, store, gate=gate, scopes=scopes)
        self.confirm: Callable[[str], bool] | None = None  # asks the person, in a chat
        self.spin = False  # a spinner on the terminal while the model thinks
        self.out, self.err = out, err
        self.messages: list[Message] = []
        self.last: Turn | None = None
        self.events: list[tuple[str, str]] = []
        self.at_prompt: str | None = None  # the prompt shown while waiting for input, if any
        self.window: int | None = None  # the model's context in tokens, when known
        self.worker = MemoryWorker(self.event, lambda work: hand_over(store.internal, work))
        self.started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        waiting = [] if store.read_only else jobs.queued(store.internal, "handover")
        if waiting and store.config.background != "off":
            try:  # (an earlier session's model was down: this one's worker tries them again)
                jobs.start_worker(store.internal, store.root)
                self.event(
                    "memory",
                    f"memory: {len(waiting)} extraction(s) handed over earlier are finishing"
                    " in the background",
                )
            except OSError as exc:
                self.event("memory_error", f"could not start the worker for them: {exc}")

    def event(self, kind: str, text: str) -> None:
        """Show a one-line notice (memory recalled/saved/failed, tool used)."""
        self.events.append((kind, text))
        marks = {"recalled": "◆", "memory": "◆", "memory_error": "!", "tool": "$", "refused": "✗"}
        mark = marks.get(kind, "·")
        line = f"{mark} {text}"
        if self.at_prompt is not None:
            # A background notice while the user types: print it above the input line, then
            # redraw the prompt and what was typed so far.
            typed = typed_so_far()
            self.err.write(f"\r\x1b[K{line}\n{self.at_prompt}{typed}")
            self.err.flush()
        else:
            print(("\r\x1b[K" if self.spin else "") + line, file=self.err, flush=True)

    def turn(self, text: str, *, stream: bool = True) -> Turn:
        """Run one user turn."""
        self.messages.append({"role": "user", "content": text})
        on_text: Callable[[str], None] | None = None
        spinner = Spinner(self.err) if self.spin else None
        if stream:

            def on_text(chunk: str) -> None:
                if spinner is not None:
                    spinner.stop()
                self.out.write(chunk)
                self.out.flush()

        if spinner is not None:
            spinner.start()
        try:
            self.last = agent_loop(
                self.messages,
                store=self.store,
                model=self.model,
                memory_model=self.memory_model,
                tools=self.tools,
                worker=self.worker,
                on_text=on_text,
                on_event=self.event,
                scopes=self.scopes,
                window=self.window,
            )
        finally:
            if spinner is not None:
                spinner.stop()
        if stream:
            self.out.write("\n")
            self.out.flush()
        return self.last

    def close(self) -> None:
        """Give queued memory work a few seconds, then hand what is left to the user's worker."""
        try:
            if self.worker.drain(0.5):  # the usual case: done by now, nothing to say
                self.worker.close(0)
                return
        except KeyboardInterrupt:
            pass
        busy = self.worker.pending()
        if busy:
            print(
                f"· finishing {', '.join(busy)} (up to {EXIT_WAIT:.0f} s; Ctrl-C to leave now)",
                file=self.err,
                flush=True,
            )
        left = self.worker.close()
        if left:
            where = "handed over to your worker"
            if self.store.config.background != "off":
                try:  # finished in the background now, not one session late
                    jobs.start_worker(self.store.internal, self.store.root)
                    where = "finishing in the background"
                except OSError as exc:
                    where = f"handed over to your worker, which could not start now ({exc})"
            print(
                f"· {where}: {', '.join(left)} (nothing is lost: what is not done is"
                " queued for the next worker)",
                file=self.err,
                flush=True,
            )

    # -- slash commands -------------------------------------------------------------------

    def command(self, line: str) -> bool:
        """Run a slash command; False means leave."""
        name, _, arg = line[1:].partition(" ")
        arg = arg.strip()
        if name in ("exit", "quit"):
            return False
        handlers: dict[str, Callable[[str], None]] = {
            "help": lambda _a: self.say(HELP),
            "memory": self.cmd_memory,
            "remember": self.cmd_remember,
            "forget": self.cmd_forget,
            "recall": self.cmd_recall,
            "consolidate": self.cmd_consolidate,
            "clear": self.cmd_clear,
            "model": self.cmd_model,
            "cost": self.cmd_cost,
        }
        handler = handlers.get(name)
        if handler is None:
            self.say(f"unknown command /{name}; /help lists them")
            return True
        try:
            handler(arg)
        except MemdirError as exc:
            self.say(f"error: {exc}")
        return True

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def cmd_memory(self, _arg: str) -> None:
        if self.scopes is None:
            rows = [(e, "") for e in self.store.entries()]
        else:
            rows = [
                (e, "" if sc.name == "project" else f", {sc.name}")
                for sc, e, _ in self.scopes.located()
            ]
        self.say(
            "\n".join(f"  {e.name} ({e.type}{where}) — {e.description}" for e, where in rows)
            or "  (no memories)"
        )

    def cmd_remember(self, arg: str) -> None:
        if not arg:
            self.say("usage: /remember TEXT")
            return
        saved = None
        user = (
            self.scopes.writable("user")
            if self.scopes is not None and self.scopes.user_root() is not None
            else None
        )
        if self.memory_model is not None:
            from memdir.errors import LLMError
            from memdir.learn.extract import plan_extraction

            with contextlib.suppress(LLMError):  # no cursor: the same words may come again
                result = plan_extraction(
                    self.store,
                    [{"role": "user", "content": f"Remember this: {arg}"}],
                    self.memory_model,
                    user_store=user,
                )
                names = []
                for store, changes in ((self.store, result.changes), (user, result.user_changes)):
                    if changes and store is not None:
                        store.apply(
                            changes, source="chat", secrets="redact", summary="remembered in chat"
                        )
                        names += [c.memory.name for c in changes]
                saved = ", ".join(names) or None
        if saved is None:  # no model, or it found nothing: keep the user's words as they are
            name = slugify(" ".join(arg.split()[:6]))
            target = user if user is not None else self.store
            target.write(
                name,
                type="user_preference",
                description=arg[:200],
                body=arg,
                source="chat",
                secrets="redact",
            )
            saved = name
        self.event("memory", f"memory saved {saved}")

    def cmd_forget(self, arg: str) -> None:
        store, name = self.store, arg
        if self.scopes is not None and arg not in self.store:
            try:
                scope, name = self.scopes.locate(arg)
            except LookupError:
                scope = None
            if scope is not None and scope.writable and scope.store is not None:
                store = scope.store
        store.delete(name, reason="forgotten in chat", source="chat")
        self.say(f"forgot {arg} ('memdir restore {arg}' brings it back)")

    def cmd_recall(self, _arg: str) -> None:
        if self.last is None or not self.last.block:
            self.say("(nothing was injected this turn)")
        else:
            self.say(self.last.block)

    def cmd_clear(self, _arg: str) -> None:
        self.messages.clear()
        self.last = None
        self.say("(new conversation; memories stay)")

    def cmd_model(self, _arg: str) -> None:
        memory = (
            f"{self.memory_model.provider} {self.memory_model.model}"
            if self.memory_model is not None
            else "none (recall by search)"
        )
        self.say(f"agent: {self.model.provider} {self.model.model}\nmemory: {memory}")

    def cmd_cost(self, _arg: str) -> None:
        from memdir.usage import UsageLog

        rows = [
            r
            for r in UsageLog(self.store.internal / USAGE).rows()
            if r.get("time", "") >= self.started
        ]
        if not rows:
            self.say("no model calls yet in this session")
            return
        by: dict[str, list[int]] = {}
        for r in rows:
            t = by.setdefault(str(r.get("purpose")), [0, 0, 0])
            t[0] += 1
            t[1] += int(r.get("input_tokens", 0))
            t[2] += int(r.get("output_tokens", 0))
        self.say(
            "\n".join(
                f"  {p}: {n} calls, {i} tokens in, {o} out" for p, (n, i, o) in sorted(by.items())
            )
        )

    def cmd_consolidate(self, _arg: str) -> None:
        if self.memory_model is None:
            self.say("no memory model configured")
            return
        from memdir.learn.consolidate import apply_plan, consolidate_memories

        self.worker.drain()
        plan = consolidate_memories(self.store, self.memory_model, dry_run=True)
        if plan.is_empty():
            self.say("nothing to consolidate")
            return
        for m in plan.merges:
            self.say(f"  merge {', '.join(m.sources)} -> {m.into.name}: {m.into.description}")
        for name, why in plan.retires:
            self.say(f"  retire {name}: {why}")
        if self.confirm is not None and not self.confirm("apply this plan?"):
            self.say("left as it was")
            return
        apply_plan(self.store, plan)
        self.say(
            f"merged {len(plan.merges)} groups, retired {len(plan.retires)}"
            " ('memdir undo' reverts it)"
        )


PROMPT = "› "


def _counts(session: Session) -> str:
    """How many memories each store holds, as the banner says it."""
    stores = session.scopes.stores() if session.scopes is not None else []
    if not stores:
        return (
            f"{plural(len(session.store.entries()), 'memory', 'memories')} in {session.store.root}"
        )
    parts = [
        f"{plural(len(st.entries()), 'memory', 'memories')} in"
        f" {'your own store' if sc.name == 'user' else sc.name + ' ' + str(st.root)}"
        for sc, st in stores
    ]
    return "; ".join(parts)


def chat(session: Session, *, stdin: TextIO = sys.stdin) -> None:
    """The interactive loop."""
    interactive = stdin.isatty()
    read_line: Callable[[str], str] = input
    if interactive:
        toolkit = prompt_toolkit_reader(session.store.internal / CHAT_HISTORY)
        if toolkit is not None:
            read_line = toolkit  # redraws itself around background notices
        else:
            use_readline(session.store.internal / CHAT_HISTORY)
        session.confirm = confirm
        session.spin = session.err.isatty()
    session.say(f"memdir chat — {_counts(session)}. /help for commands, Ctrl-D to leave.")
    try:
        while True:
            try:
                if interactive:
                    session.at_prompt = PROMPT if read_line is input else None
                    line = read_line(PROMPT)
                else:
                    line = read_piped(stdin)
            except KeyboardInterrupt:
                session.say("")
                continue
            except EOFError:
                break
            finally:
                session.at_prompt = None
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if not session.command(line):
                    break
                continue
            try:
                interrupted = session.turn(line).interrupted
            except KeyboardInterrupt:
                interrupted = True
            except MemdirError as exc:  # the model failed: say so, keep the session
                print(f"memdir: error: {exc}", file=session.err, flush=True)
                continue
            if interrupted:
                session.say("(interrupted)")
    finally:
        session.close()
