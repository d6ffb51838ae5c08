"""Hooks for Claude Code and Codex: recall before every prompt, learn after every turn.

``prompt`` (UserPromptSubmit) reads the event on stdin, recalls for the prompt (and the last
turns of the session file it names) and prints the ``<relevant_memories>`` block as
``hookSpecificOutput.additionalContext`` — the field both hosts add to the model's context.
The memory model gets a fixed budget (``hook_budget``, 2 s); past it, search chooses.
``learn`` (Stop, SessionEnd, PreCompact) queues a learn job for the store's one worker
(``jobs``), which extracts from where the last run stopped (the extraction cursor), then
consolidates when due; the host is never held up. A hook never blocks or breaks its host:
whatever goes wrong, it exits 0 with one line on stderr and a line in ``<state>/hooks.jsonl``.
``install``/``uninstall`` merge memdir's entries into the host's settings file and take out
exactly those. This module does NOT parse session files (``transcripts`` does).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict, cast

from .. import jobs
from ..code import conventions
from ..config import Config, find_store_dir, load_config
from ..disk.layout import HOOK_LOG as LOG
from ..disk.layout import state_dir
from ..disk.lock import open_folder
from ..disk.statefile import append_line
from ..errors import MemdirError, StoreNotFound
from ..providers import Message
from ..scopes import Scopes, make_private, user_store_dir
from ..store import open_store, readable
from .hostsettings import HOSTS as HOSTS
from .hostsettings import install as install
from .hostsettings import installed as installed
from .hostsettings import uninstall as uninstall
from .lease import Lease, StoreSource
from .race import HookError, race
from .transcripts import read_session


class HookEvent(TypedDict, total=False):
    """What Claude Code and Codex send a hook on stdin (the fields memdir reads; hosts send
    more, which are kept as they came)."""

    hook_event_name: str
    session_id: str
    cwd: str
    prompt: str
    transcript_path: str
    stop_hook_active: bool
    source: str  # SessionStart: startup, resume, clear, compact
    tool_name: str  # PreToolUse: the tool about to run
    tool_input: dict[str, Any]  # PreToolUse: its arguments


LogRecord = dict[str, Any]  # one line of hooks.jsonl: JSON written for people and doctor


def read_event(raw: str) -> HookEvent:
    """The hook event from stdin; HookError when it is not one."""
    try:
        event = json.loads(raw) if raw.strip() else None
    except ValueError:
        raise HookError(
            "the hook input is not JSON — the host should send one JSON object"
        ) from None
    if not isinstance(event, dict):
        raise HookError("the hook input is not a JSON object")
    # the fields memdir reads, each of the type ``HookEvent`` says (others are left out)
    return cast(HookEvent, {k: event[k] for k, kind in _FIELDS if isinstance(event.get(k), kind)})


_FIELDS: tuple[tuple[str, type], ...] = (
    ("hook_event_name", str),
    ("session_id", str),
    ("cwd", str),
    ("prompt", str),
    ("transcript_path", str),
    ("stop_hook_active", bool),
    ("source", str),
    ("tool_name", str),
    ("tool_input", dict),
)


def run(
    kind: str,
    host: str | None,
    raw: str,
    *,
    cwd: str | None = None,
    stores: StoreSource | None = None,
    worker: Worker | None = None,
) -> tuple[str, str]:
    """One hook call (``start``, ``prompt``, ``tool`` or ``learn``) on the event text ``raw``:
    what goes to stdout and to stderr. Never raises: a failure is one line on stderr and in the hook
    log. ``cwd``: the hook's folder, for an event that names none; ``worker``: who takes the
    jobs queued (the resident's own worker; None: the store's detached one)."""
    event = None
    try:
        event = read_event(raw)
        if cwd is not None and "cwd" not in event:
            event["cwd"] = cwd
        if kind == "start":
            return start(event, host=host, stores=stores), ""
        if kind == "prompt":
            return prompt(event, host=host, stores=stores, worker=worker), ""
        if kind == "tool":
            return tool(event, host=host, stores=stores), ""
        learn(event, host=host, worker=worker)
        return "", ""
    except Exception as exc:  # a hook must never break its host: report and go on
        line = f"memdir hook {kind}: {exc}".splitlines()[0]
        if event is not None:
            try:
                store_dir = _config_for(event).dir
                if state_dir(store_dir).is_dir():
                    log_line(
                        store_dir,
                        {"hook": kind, "host": host, "status": "error", "error": str(exc)},
                    )
            except Exception as also:  # the store's log cannot be written: said with the error
                if str(also) != str(exc):
                    line = f"{line} (not logged: {also})".splitlines()[0]
        return "", line


def _config_for(event: HookEvent) -> Config:
    """The configuration of the store for the event's working folder."""
    cwd = event.get("cwd")
    start = Path(cwd) if isinstance(cwd, str) and os.path.isdir(cwd) else None
    folder, source = find_store_dir(None, os.environ.get("MEMDIR_DIR"), start)
    if start is not None and not folder.is_absolute():
        folder = start / folder
    return dataclasses.replace(load_config({"dir": folder}), dir_source=source)


def log_line(store_dir: Path, record: LogRecord) -> None:
    """One line of ``<state>/hooks.jsonl`` (best effort)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    append_line(state_dir(store_dir) / LOG, {"time": stamp, **record})


MAX_PROMPT_CHARS = 20_000  # of a prompt, what recall reads (its end: where the question is)


def _conversation(event: HookEvent, said: str) -> tuple[list[Message], str | None]:
    """The last turns of the session file, if it can be read, and the prompt (its end); the
    key its turns are kept as episodes under (None: no session file)."""
    from ..learn.conversation import conversation_key

    messages: list[Message] = []
    key = None
    path = event.get("transcript_path")
    if path is not None:
        try:  # (read_session opens only a regular file: never a pipe or a device)
            whole = read_session(Path(path))
            messages, key = whole[-6:], conversation_key(whole) if whole else None
        except MemdirError:
            pass  # no session to read: the prompt alone is recalled for
    messages.append({"role": "user", "content": said[-MAX_PROMPT_CHARS:]})
    return messages, key


def prompt(
    event: HookEvent,
    *,
    host: str | None,
    budget: float | None = None,
    stores: StoreSource | None = None,
    worker: Worker | None = None,
) -> str:
    """The hook's stdout for a UserPromptSubmit event ('' when nothing applies). The memory
    model gets ``budget`` seconds, its SDK's import included; search runs meanwhile and is
    used when the model is late or absent. Past ``budget + SEARCH_GRACE`` nothing is
    recalled: the host never waits on memdir. Memories left without a vector are queued for
    ``worker`` (None: the store's detached worker)."""
    from ..recall import log_recall, render_block

    started = time.monotonic()
    said = event.get("prompt")
    if not isinstance(said, str):
        raise HookError("the event has no 'prompt' text — is this hook on UserPromptSubmit?")
    config = _config_for(event)  # the project the event is in: its settings, its budget
    if budget is None:
        budget = config.hook_budget
    stores = stores or FRESH
    lease = stores.take(config, budget)
    try:
        store = lease.scopes
        messages, current = _conversation(event, said)
        selection = race(config, lease, messages, budget, started)
        if current is not None:  # the session's own turns are in its context already
            selection.episodes = [
                s
                for s in selection.episodes
                if not s.turn.ref.split("#", 1)[0].endswith(f"-{current}.jsonl")
            ]
        from ..standing import given

        standing = given(store, event.get("session_id"))  # what the session has from its start
        names = [n for n in selection.names if n not in standing]
        block = render_block(store, names, config.recall_token_budget, selection.episodes)
        log_recall(
            store,
            selection,
            said,
            source=f"hook:{host or 'unknown'}",
            session=event.get("session_id"),
            block=block,
            started=started,
        )
        for _, opened in store.stores():
            if opened.index.backlog and not opened.read_only:  # the rest, later, not here
                jobs.index_in_background(
                    opened.root,
                    _hand(worker, opened.config),
                    start=opened.config.background != "off",
                )
    finally:
        lease.release()
    return context_for("UserPromptSubmit", block)


def context_for(event_name: str, text: str) -> str:
    """A hook's stdout that adds ``text`` to the host's context ('' adds nothing): the
    ``additionalContext`` both hosts read."""
    if not text:
        return ""
    out = {"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}}
    return json.dumps(out, ensure_ascii=False)


def _lease(config: Config, stores: StoreSource | None) -> Lease | None:
    """The stores of ``config`` for a hook that must not wait on them; None: no store."""
    try:
        return (stores or FRESH).take(config, 0.0)
    except StoreNotFound:
        return None


def start(event: HookEvent, *, host: str | None, stores: StoreSource | None = None) -> str:
    """The hook's stdout for a SessionStart event (startup, resume, clear, compact): the
    standing memories and the memory index, as context the host adds to the session; ''
    when there is no store."""
    from .. import wings
    from ..standing import remember_session, session_start

    started = time.monotonic()
    config = _config_for(event)
    wings.event("started", config)  # (git: what teammates pushed, pulled in the background)
    lease = _lease(config, stores)
    if lease is None:
        return ""
    try:
        store = lease.scopes
        given = session_start(store, config)
        session = event.get("session_id")
        remember_session(store, session if isinstance(session, str) else "", given.names)
        log_standing(store, given, host, event, started)
    finally:
        lease.release()
    return context_for("SessionStart", given.text)


def tool(event: HookEvent, *, host: str | None, stores: StoreSource | None = None) -> str:
    """The hook's stdout for a PreToolUse event: a short reminder of the user's standing
    conventions the pending write, edit or command would break; '' when it breaks none (or
    there is no store). Logged in the recall log when it reminds."""
    from ..policy import Policy
    from ..recalllog import Recalled, record
    from ..standing import given, session_start
    from .toolcheck import findings, pending, reminder

    started = time.monotonic()
    name, args = event.get("tool_name"), event.get("tool_input")
    if not isinstance(name, str) or not isinstance(args, dict):
        raise HookError("the event names no tool_name and tool_input — is this on PreToolUse?")
    work = pending(name, args)
    if not work.code and not work.command:
        return ""
    config = _config_for(event)
    lease = _lease(config, stores)
    if lease is None:
        return ""
    try:
        store = lease.scopes
        session = event.get("session_id")
        # the rules this session was given at its start (its own session start, not a second)
        names = given(store, session if isinstance(session, str) else None)
        rules = []
        gate = Policy(store)
        for shown in sorted(names) if names else session_start(store, config).names:
            mem = readable(store, shown)  # (None: gone since the session started)
            if (
                mem is not None and gate.verdict(shown, mem).users
            ):  # (not a text changed since by a door)
                rules.append((shown, mem.body if conventions.one(mem.body) else mem.description))
        found = findings(rules, work)
        home = store.home()
        if found and home is not None and home.config.recall_log:
            record(
                home.internal,
                source=f"tool:{host or 'unknown'}",
                question=f"({name} {' '.join(p for p, _ in work.code) or work.command[:80]})",
                path="tool",
                memories=[Recalled(name=n, scope=None, score=None) for n, _, _ in found],
                note="; ".join(b for _, _, broken in found for b in broken[:2])[:300],
                session=event.get("session_id")
                if isinstance(event.get("session_id"), str)
                else None,
                ms=round((time.monotonic() - started) * 1000),
            )
    finally:
        lease.release()
    return context_for("PreToolUse", reminder(found) if found else "")


def log_standing(
    store: Scopes, given: Any, host: str | None, event: HookEvent, started: float
) -> None:
    """What a session was given at its start, in the recall log beside the prompts' recalls:
    the rules that stood, those the budget cut, how many wait, the tokens and the time since
    ``started``."""
    from ..recalllog import Recalled, record

    home = store.home()
    if home is None or not home.config.recall_log:
        return
    why = event.get("source")
    record(
        home.internal,
        source=f"start:{host or 'unknown'}",
        question=f"(session start{f': {why}' if isinstance(why, str) and why else ''})",
        path="standing",
        memories=[Recalled(name=n, scope=None, score=None) for n in given.names],
        note=f"{len(given.cut)} cut by the budget"
        + (f" ({', '.join(given.cut[:5])})" if given.cut else "")
        + f"; {given.waiting} waiting for the user"
        + (f"; conflicted: {', '.join(given.conflicted)}" if given.conflicted else ""),
        session=event.get("session_id") if isinstance(event.get("session_id"), str) else None,
        tokens=given.tokens,
        ms=round((time.monotonic() - started) * 1000),
    )


class _Fresh:
    """Each call's stores opened for it, and dropped with it."""

    def take(self, config: Config, budget: float) -> Lease:
        return Lease(_reader(config, budget))


FRESH: StoreSource = _Fresh()


def _reader(config: Config, budget: float, *, watch: bool = False) -> Scopes:
    """The project's, the user's and shared stores. A prompt embeds its question only: the
    memories without a vector yet rank by BM25 and are embedded in the background (the
    learn worker, ``memdir index --background``), never on the person's time."""
    scopes = Scopes(config, watch=watch)
    if not scopes.stores():
        raise StoreNotFound(f"no memory store at {config.dir} — run 'memdir init' there")
    for _, store in scopes.stores():
        store.index.pace(budget=0.0)
    return scopes


Worker = Callable[[Path, Config], None]  # takes the queue of a store (state folder, config)


def _hand(worker: Worker | None, config: Config) -> Callable[[Path], None] | None:
    """The store's queue (its state folder) handed to ``worker`` for the store ``config``
    opens; None: no worker here (the store's detached one is started)."""
    if worker is None:
        return None
    return lambda state: worker(state, config)


def learn(event: HookEvent, *, host: str | None, worker: Worker | None = None) -> Path | None:
    """Queue a learn job for the event's store and hand the queue to ``worker`` (None: start
    the store's detached worker); the job's file (None: the session left no transcript, so
    there is nothing to learn)."""
    path = event.get("transcript_path")
    if not isinstance(path, str) or not path:
        raise HookError("the event names no transcript_path — nothing to learn from")
    if not Path(path).is_file():  # the session ended before it wrote anything
        return None
    config = _config_for(event)
    if (
        config.dir_source in ("default", "git")
        and not config.dir.is_dir()
        and not config.database_url
    ):
        # no project store: learn into the person's own store, never start one unasked
        root = user_store_dir(config)
        if root is None:
            raise HookError(
                f"no memory store at {config.dir} and the user store is off — run"
                " 'memdir init' in the project to learn there"
            )
        config = dataclasses.replace(config, dir=root, dir_source="user")
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        make_private(root)
    # the queue is all the hook needs: the store is read by the worker (its catalogue is a
    # sweep of the folder), never on the host's time
    if config.database_url:
        internal = open_store(config, create=True, watch=False).internal
    else:
        open_folder(config.dir, create=True, cache_dir=None)
        internal = state_dir(config.dir)
    data = {"event": event, "host": host}
    starts = worker is None and config.background != "off"
    job = jobs.enqueue(internal, "learn", data, start=config.dir if starts else None)
    if worker is not None:
        worker(internal, config)
    return job
