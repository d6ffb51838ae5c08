"""The terminal side of the chat: the spinner, questions to the person, line reading with
history (prompt_toolkit when installed, readline otherwise).
This module does NOT run the agent (``repl`` does).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar, TextIO

from memdir.gate.safetext import one_line


class Spinner:
    """A line on the terminal that turns while the model thinks, gone at the first word."""

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

    active: ClassVar[list[Spinner]] = []  # the one turning, so that a question can silence it

    def __init__(self, err: TextIO) -> None:
        self.err = err
        self.done = threading.Event()
        self.lock = threading.Lock()  # held while a question is on the screen
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        Spinner.active.append(self)
        self.thread.start()

    def _run(self) -> None:
        i = 0
        while not self.done.wait(0.1):
            with self.lock:
                if self.done.is_set():
                    break
                self.err.write(f"\r{self.FRAMES[i % len(self.FRAMES)]} thinking…")
                self.err.flush()
            i += 1

    def stop(self) -> None:
        if not self.done.is_set():
            self.done.set()
            if self.thread.is_alive():
                self.thread.join()
            self.err.write("\r\x1b[K")
            self.err.flush()
        if self in Spinner.active:
            Spinner.active.remove(self)

    @classmethod
    @contextlib.contextmanager
    def quiet(cls) -> Iterator[None]:
        """No spinner draws over the screen meanwhile (a question is being asked)."""
        held = list(cls.active)
        for spinner in held:
            spinner.lock.acquire()
            spinner.err.write("\r\x1b[K")
            spinner.err.flush()
        try:
            yield
        finally:
            for spinner in held:
                spinner.lock.release()


def ask_on_terminal(kind: str, what: str) -> str:
    """Ask the person at the terminal whether the agent may go ahead."""
    shown = one_line(what)
    shown = shown if len(shown) <= 200 else shown[:197] + "…"
    label = "run" if kind == "bash" else "write"
    while True:
        try:
            with Spinner.quiet():
                answer = (
                    input(
                        f"? allow the agent to {label}: {shown}\n  [y] once  [a] always"
                        " this session  [n] no › "
                    )
                    .strip()
                    .lower()
                )
        except EOFError:
            return "deny"
        if answer in ("y", "yes"):
            return "once"
        if answer in ("a", "always"):
            return "always"
        if answer in ("n", "no", ""):
            return "deny"


def prompt_toolkit_reader(history: Path, **io: Any) -> Callable[[str], str] | None:
    """A line reader built on prompt_toolkit (``memdir[chat]``): editing and history on every
    platform, and notices printed by other threads land above the prompt. None without it."""
    try:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory
        from prompt_toolkit.patch_stdout import patch_stdout
    except ImportError:
        return None
    prompt_session: Any = PromptSession(history=FileHistory(str(history)), **io)

    def read(prompt: str) -> str:
        with patch_stdout(raw=True):
            return str(prompt_session.prompt(prompt))

    return read


def typed_so_far() -> str:
    try:
        import readline
    except ImportError:  # pragma: no cover - not on every platform
        return ""
    return str(readline.get_line_buffer())


def use_readline(history: Path) -> None:
    """Line editing and persistent input history when attached to a terminal."""
    try:
        import readline
    except ImportError:  # pragma: no cover - not on every platform
        return
    with contextlib.suppress(OSError):
        readline.read_history_file(history)
    readline.set_history_length(1000)
    import atexit

    atexit.register(lambda: _save_history(readline, history))


def _save_history(readline: Any, history: Path) -> None:
    with contextlib.suppress(OSError):
        readline.write_history_file(history)


def confirm(question: str) -> bool:
    try:
        return input(f"? {question} [y/N] › ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def read_piped(stdin: TextIO) -> str:
    line = stdin.readline()
    if not line:
        raise EOFError
    return line
