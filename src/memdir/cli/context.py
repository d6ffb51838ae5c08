"""The command line's shared pieces: the context every command gets (configuration and
store, resolved once), ``--json`` output and one-line failures.

This module does NOT define commands (``cli``, ``cli_llm`` and ``cli_hooks`` do).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from ..config import Config, ignored_notice, load_config
from ..disk.layout import USAGE
from ..errors import MemdirError, MemoryNotFound, StoreNotFound
from ..jobs import index_in_background
from ..scopes import PROJECT, USER, Scope, Scopes
from ..store import Store, open_store

if TYPE_CHECKING:
    from ..providers import ChatModel

F = TypeVar("F", bound=Callable[..., Any])


# what a host sets in the environment of the commands its agent runs
HOST_AGENT_MARKS = (("CLAUDECODE", "claude-code"), ("CODEX_THREAD_ID", "codex"))


def host_agent(environ: Mapping[str, str]) -> str | None:
    """The host whose agent runs this command (its tool's environment says so), or None."""
    return next((host for var, host in HOST_AGENT_MARKS if environ.get(var)), None)


class Ctx:
    """What the group callback resolved, handed to every command."""

    def __init__(self, overrides: dict[str, Any]) -> None:
        import os

        self.overrides = overrides
        self.agent = host_agent(os.environ)
        self._config: Config | None = None
        self._store: Store | None = None
        self._scopes: Scopes | None = None
        self.also: tuple[str, ...] = tuple(overrides.pop("also", None) or ())
        self.create_store = False  # commands that write set this: they may create the store
        self._paced: list[Store] = []

    @property
    def source(self) -> str:
        """Who the command's writes are from: the user (``cli``), or the host's agent that
        runs it (``host-agent:claude-code``), whose text is not the user's own."""
        return "cli" if self.agent is None else f"host-agent:{self.agent}"

    def users_decision(self, what: str) -> None:
        """Refuse ``what`` (accepting, approving, trusting) when an agent runs the command:
        only the user decides what stands as theirs."""
        if self.agent is not None:
            fail(
                f"{what} is yours to decide, and {self.agent}'s agent is running this command —"
                " run it in your own terminal"
            )

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = load_config(self.overrides)
            notice = ignored_notice(self._config)
            if notice:
                click.echo(f"memdir: warning: {notice}", err=True)
        return self._config

    @property
    def store(self) -> Store:
        """The store (found as git finds .git); read commands on a missing one fail."""
        if self._store is None:
            progress = _Progress() if sys.stderr.isatty() else None
            try:
                self._store = open_store(
                    self.config, create=self.create_store, watch=None, progress=progress
                )
            finally:
                if progress is not None:
                    progress.close()
            self._pace(self._store)
            self._scopes = None  # any opened before the project store existed
        return self._store

    def _pace(self, store: Store) -> None:
        """A command's search embeds new memories for a few seconds at most; the rest are
        embedded by a background process when the command ends."""
        if store in self._paced:
            return
        self._paced.append(store)
        progress = _Progress("Embedding memories for search") if sys.stderr.isatty() else None
        store.index.pace(progress, budget=self.config.embed_budget)
        if len(self._paced) == 1:
            context = click.get_current_context(silent=True)
            if context is not None:
                context.call_on_close(self._embed_the_rest)

    def _embed_the_rest(self) -> None:
        for store in self._paced:
            left = store.index.backlog
            if left and not store.read_only:
                started = index_in_background(store.root, start=store.config.background != "off")
                if started:
                    click.echo(
                        f"memdir: {left} memories are being embedded in the background;"
                        " until then search finds them by their words ('memdir index'"
                        " embeds them now)",
                        err=True,
                    )

    def scopes(self, scope: str | None = None, *, require: bool = True) -> Scopes:
        """The project, user and shared stores (``scope``: only project or user; "all" or
        None: every one). With ``require``, fails as ``store`` does when none exists at all
        (reads); writes to the user's store pass ``require=False``."""
        if self._scopes is None:
            project = self.store_or_none()
            self._scopes = Scopes(self.config, project=project, also=self.also, watch=None)
            for _, store in self._scopes.stores():
                self._pace(store)
        scopes = self._scopes
        if (
            require
            and scope in (None, "all", PROJECT)
            and scopes.project is None
            and (self.config.dir_source in ("flag", "env") or self.config.database_url)
        ):
            _ = self.store  # a store named with --dir, MEMDIR_DIR or --store must exist
        if scope in (PROJECT, USER):
            scopes = scopes.only(scope)
        if require and not scopes.stores() and not (scope == USER and scopes.scopes):
            if scope is None or scope == "all" or scope == PROJECT:
                _ = self.store  # the usual "no memory store at X" error
            if scope == USER:
                raise StoreNotFound(
                    'the user store is turned off (user_dir = "none" in '
                    "config.toml, or MEMDIR_USER_DIR=none)"
                )
            raise StoreNotFound(f"no {scope} store yet — 'memdir add --scope {scope}' creates it")
        return scopes

    def pick(
        self, spec: str, scope: str | None = None, *, write: bool = False
    ) -> tuple[Store, str, str]:
        """The store, real name and scope of the memory ``spec`` (``NAME`` or ``user:NAME``):
        the named or given scope, else the first scope holding it (project first), else the
        project's. ``write``: the scope must be writable."""
        if ":" in spec and scope in (None, "all"):
            scope, spec = spec.rsplit(":", 1)
        scopes = self.scopes()
        found: Scope | None
        if scope not in (None, "all"):
            found = scopes.scope(scope)
        else:
            found = next((s for s, st in scopes.stores() if spec in st), None)
            if found is None:  # gone, but kept in a store's history (restore, history, diff)
                found = next((s for s, st in scopes.stores() if st.history(spec)), None)
            if found is None:
                import difflib

                shown = [name for _, _, name in scopes.located()]
                close = difflib.get_close_matches(spec, shown, n=1, cutoff=0.75)
                if close:
                    raise MemoryNotFound(f"no memory named {spec!r} — did you mean {close[0]!r}?")
                found = scopes.scope(PROJECT)
        if write:
            return scopes.writable(found.name), spec, found.name
        if found.store is None:
            raise StoreNotFound(f"no {found.name} store yet at {found.root}")
        return found.store, spec, found.name

    def user_store_for_learning(self) -> Store | None:
        """The user's store that extraction writes the person's memories to (None: none)."""
        scopes = self.scopes(require=False)
        return scopes.writable(USER) if scopes.user_root() is not None else None

    def store_or_none(self) -> Store | None:
        """The store if there is one (for commands that only log to it)."""
        try:
            return self.store
        except StoreNotFound:
            return None


class _Progress:
    """A progress bar on the terminal for a first open that takes over a second."""

    def __init__(self, label: str = "Reading memory files") -> None:
        import time

        self.label = label
        self.start = time.monotonic()
        self.bar: Any = None
        self.done = 0

    def __call__(self, done: int, total: int) -> None:
        import time

        if self.bar is None:
            if time.monotonic() - self.start < 1.0 or total - done < 100:
                return
            self.bar = click.progressbar(
                length=total, label=self.label, file=sys.stderr, show_eta=True
            )
            self.bar.__enter__()
        self.bar.update(done - self.done)
        self.done = done
        if done >= total:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar, self.done = None, 0


pass_ctx = click.make_pass_decorator(Ctx)


def json_option(f: F) -> F:
    """Add ``--json`` to a read command."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")(f)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def read_given(path: Path) -> str:
    """The text of a file named on the command line (``-``: standard input); a one-line
    error when it cannot be read or is not UTF-8."""
    try:
        return sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MemdirError(f"cannot read {path} ({exc}) — pass a readable UTF-8 file") from None


def fail(message: str) -> NoReturn:
    raise MemdirError(message)


def scope_option(
    default: str | None, writes: bool = False, holds: bool = False
) -> Callable[[F], F]:
    """``--scope``: project, user (or all, for reads). ``holds``: the scope whose store holds
    the memory named (default: the first that does, project first)."""
    choices = ["project", "user"] if writes else ["project", "user", "all"]
    if holds:
        what = "the store that holds NAME (default: the first that does, project first)"
    elif writes and default is None:
        what = "where to write (default: user for user_preference, else project)"
    else:
        what = f"which {'store' if writes else 'stores'} (default: {default})"
    option: Callable[[F], F] = click.option(
        "--scope", type=click.Choice(choices), default=default, help=f"Scope: {what}."
    )
    return option


def name_and_version(spec: str) -> tuple[str, int | None]:
    """``NAME`` or ``NAME@vN`` (``NAME.md`` is accepted for a file name)."""
    name, _, ver = spec.partition("@")
    name = name[:-3] if name.endswith(".md") else name
    if not ver:
        return name, None
    if not re.fullmatch(r"v?\d+", ver):
        fail(f"{spec!r} is not NAME@vN — see 'memdir history {name}' for the versions")
    return name, int(ver.lstrip("v"))


def existing_store(c: Ctx, scope: str) -> Store:
    """The project's or the user's store, which must exist already (never created here)."""
    if scope == PROJECT:
        return c.store
    scopes = c.scopes(scope)
    found = scopes.stores()
    if not found:
        raise StoreNotFound(
            f"no {scope} store yet at {scopes.scope(scope).root} — "
            f"'memdir add --scope {scope}' creates it"
        )
    return found[0][1]


def build_model(c: Ctx, *, memory: bool) -> ChatModel:
    """The configured model (memory model if ``memory``), logging usage into the store."""
    from ..providers import make_model

    store = c.store_or_none()
    return make_model(
        c.config, memory=memory, usage_log=store.internal / USAGE if store is not None else None
    )
