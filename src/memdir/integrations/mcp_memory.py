"""The memory behind ``memdir mcp``: the stores the tools read and write, and the tools
themselves as methods (``mcp.TOOLS`` registers them with their descriptions).

Arguments accept the names a model is likely to guess (``query``/``q``/``text``,
``name``/``id``/``memory``). Every failure is a tool error whose text is one line saying what
went wrong and how to fix it; the server keeps answering. Tool calls run one at a time.
This module does NOT decide what to remember: the host's model does, through the tools.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError

from .. import wings
from ..config import STANDING_TYPES, Config
from ..disk.layout import USAGE
from ..errors import LLMUnavailable, MemdirError, MemoryNotFound, SecretFound, StoreNotFound
from ..gate.safetext import lines_of, one_line
from ..memory import Memory, slugify
from ..notes import guess_type
from ..plan import Put, Remove
from ..policy import Policy, shown
from ..providers import Message
from ..recall import (
    estimate_tokens,
    index_section,
    log_recall,
    render_block,
    select,
)
from ..review import Landed, held_why, land
from ..scopes import PROJECT, USER, Scopes, open_user_store, route, user_store_dir
from ..store import Store, open_store
from ..store.base import restoring
from .mcp_shown import as_read, described, pick, where

log = logging.getLogger("memdir.mcp")
PAGE_TOKENS = 2000  # a page of `list` never costs the host more than this
MAX_K = 50  # search results one call may ask for
T = TypeVar("T")
HOW = {
    "llm": "chosen by the memory model",
    "search": "chosen by search",
    "search-fallback": "chosen by search (the model failed)",
}


class MemoryServer:
    """The store behind the tools: opened on first use (or created by the first remember),
    used by one tool call at a time."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._store: Store | None = None
        self._scopes: Scopes | None = None
        self._user: Store | None = None
        self._lock = threading.Lock()
        self._model: Any = None
        self.client = ""  # the connected host's name (its initialize request's clientInfo)

    @property
    def source(self) -> str:
        """What the log records a write of this server as: ``mcp:<client>`` (provenance)."""
        name = re.sub(r"[^\w.-]+", "-", self.client.strip().lower())[:40].strip("-")
        return f"mcp:{name}" if name else "mcp"

    def store(self, *, create: bool = False) -> Store:
        if self._store is None:
            try:
                self._store = open_store(self.config, create=create, watch=True)
            except StoreNotFound:
                raise ToolError(
                    f"no memory store at {self.config.dir} yet — call remember to"
                    " create it, or start the server with --dir"
                ) from None
        return self._store

    def scopes(self) -> Scopes:
        """The project's, the user's and the shared stores, read as one."""
        if self._scopes is None or (self._scopes.project is None and self._store is not None):
            try:
                project: Store | None = self.store()
            except ToolError:
                project = None
            self._scopes = Scopes(self.config, project=project, watch=True)
        if not self._scopes.stores():
            self.store()  # the usual "no memory store" error
        return self._scopes

    def writable(self, where: str) -> Store:
        """The project's store (created if need be) or the user's (created owner-only)."""
        if where == PROJECT:
            if (
                self.config.dir_source != "default"
                or self.config.dir.is_dir()
                or user_store_dir(self.config) is None
            ):
                return self.store(create=True)
            where = USER  # started outside any project (a desktop host): the person's store
        if self._user is None:
            root = user_store_dir(self.config)
            if root is None:
                raise ToolError('there is no user store (user_dir = "none") — use scope "project"')
            self._user = open_user_store(root, self.config, watch=True)
            self._scopes = None  # read the stores again, the new one included
        return self._user

    def scope_choices(self) -> tuple[str, ...]:
        """The scopes ``remember`` may be told to write to."""
        return (PROJECT, USER)

    def target(self, shown: str, *, write: bool = True) -> tuple[Store, str]:
        """The store and real name of the memory ``shown`` (``user:NAME`` for the user's
        copy of a name the project also has; a forgotten memory's store is the one whose
        history holds it); the project's when no scope holds it."""
        scopes = self.scopes()
        try:
            scope, name = scopes.locate(shown)
        except LookupError:
            scope_name, _, name = shown.rpartition(":")
            if scope_name:
                scope = scopes.scope(scope_name)
            else:
                found = next((s for s, st in scopes.stores() if st.history(name)), None)
                if found is None:
                    return self.store(), shown  # unknown here: the project store says so
                scope = found
            if scope.store is None:
                raise ToolError(
                    f"no {scope.name} store yet — nothing named {name!r} there"
                ) from None
        if write and not scope.writable:
            raise ToolError(f"{shown} is in {scope.name} ({scope.root}), which is read-only")
        assert scope.store is not None
        return scope.store, name

    def call(self, fn: Callable[[], T]) -> T:
        """Run one tool body: serialised, with memdir's errors as one-line tool errors."""
        with self._lock:
            try:
                return fn()
            except SecretFound as exc:
                what = str(exc).split(" — ")[0]
                raise ToolError(
                    f"{what} — leave the secret out and save the rest (say where"
                    " it is kept instead of what it is)"
                ) from None
            except MemdirError as exc:
                raise ToolError(str(exc)) from None
            except OSError as exc:
                raise ToolError(
                    f"{exc.strerror or exc} — check the store folder and its permissions"
                ) from None

    def model(self) -> Any:
        """The memory model for recall, or None (then search chooses)."""
        if self._model is None:
            from ..providers import make_model

            home = self.scopes().home()
            usage = None if home is None else home.internal / USAGE
            try:
                self._model = make_model(self.config, memory=True, usage_log=usage)
            except LLMUnavailable:
                self._model = False
        return self._model or None

    # -- the tools (registered by ``mcp.build_server`` from ``mcp.TOOLS``) ---------------------

    def recall(
        self,
        message: str | None = None,
        query: str | None = None,
        text: str | None = None,
        recent: list[str] | None = None,
        as_of: str | None = None,
    ) -> str:
        said = str(pick("message", message, query, text))
        if as_of is not None:
            return self._recall_as_of(said, str(as_of))

        def run() -> str:
            scopes = self.scopes()
            messages: list[Message] = [{"role": "user", "content": r} for r in recent or []]
            messages.append({"role": "user", "content": said})
            cfg = self.config
            started = time.monotonic()
            sel = select(scopes, messages, self.model(), max_items=cfg.recall_max_items)
            block = render_block(scopes, sel.names, cfg.recall_token_budget, sel.episodes)
            log_recall(scopes, sel, said, source=self.source, block=block, started=started)
            if not block:
                return "No saved memory applies to this message."
            named = ", ".join(shown(scopes, sel.names))
            return f"Recalled {named} ({HOW[sel.path]}).\n\n{block}"

        return self.call(run)

    def _recall_as_of(self, said: str, as_of: str) -> str:
        """What the memories said at ``as_of`` about the message (from their history)."""

        def run() -> str:
            recall_at, cfg = wings.need("memdir.asof", "recall"), self.config
            when, names, block = recall_at(
                self.scopes(), said, as_of, cfg.recall_max_items, cfg.recall_token_budget
            )
            if not block:
                return f"No saved memory applied to this message as of {when}."
            return f"Recalled {', '.join(names)} as of {when}.\n\n{block}"

        return self.call(run)

    def search(
        self, query: str | None = None, q: str | None = None, text: str | None = None, k: int = 5
    ) -> str:
        wanted = str(pick("query", query, q, text))

        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise ToolError(f"k must be a whole number from 1 to {MAX_K} (got {k!r})")

        def run() -> str:
            scopes = self.scopes()
            held = Policy(scopes).held()
            hits = [h for h in scopes.search(wanted, k + len(held)) if h.name not in held][:k]
            if not hits:
                return "No matching memories."
            return "\n".join(
                f"{h.name} ({one_line(h.entry.type)}{where(scopes, h.name)}, score"
                f" {h.score:.2f}) — {described(scopes, h.entry)}"
                for h in hits
            )

        return self.call(run)

    def list_(self, type: str | None = None, cursor: str | None = None) -> str:
        if type not in (None, "") and type not in self.config.types:
            raise ToolError(f"type {type!r} is not one of {', '.join(self.config.types)}")
        return self.call(lambda: self._page(type, cursor))

    def _page(self, type: str | None, cursor: str | None) -> str:
        scopes = self.scopes()
        held = Policy(scopes).held()
        entries = [e for e in scopes.entries() if type in (None, "", e.type) and e.name not in held]
        try:
            start = int(cursor or 0)
        except ValueError:
            raise ToolError(
                f"cursor {cursor!r} is not one this server gave — omit it to"
                " start from the first page"
            ) from None
        if start < 0 or start > len(entries):
            raise ToolError(
                f"cursor {start} is past the end ({len(entries)} memories) — omit it to start again"
            )
        lines: list[str] = [f"{len(entries)} memories."]
        used = estimate_tokens(lines[0]) + 20
        for i in range(start, len(entries)):
            e = entries[i]
            line = f"- {e.name} ({one_line(e.type)}{where(scopes, e.name)}): {described(scopes, e)}"
            cost = estimate_tokens(line) + 1
            if used + cost > PAGE_TOKENS and i > start:
                lines.append(f'(more: call list with cursor "{i}")')
                break
            lines.append(line)
            used += cost
        return "\n".join(lines)

    def read(
        self, name: str | None = None, id: str | None = None, memory: str | None = None
    ) -> str:
        which = str(pick("name", name, id, memory))

        return self.call(lambda: as_read(self.scopes(), which))

    def remember(
        self,
        description: str,
        body: str = "",
        type: str | None = None,
        name: str | None = None,
        id: str | None = None,
        scope: str | None = None,
    ) -> str:
        def run() -> str:
            if scope not in (None, "", *self.scope_choices()):
                raise ToolError(f"scope {scope!r} is not one of {', '.join(self.scope_choices())}")
            kind = type or guess_type(f"{description}\n{body}", self.config.types)
            store = self.writable(route(self.config, kind, scope or None))
            chosen = (name or id or slugify(" ".join(description.split()[:6]))).strip()
            existed = chosen in store
            there = "" if store is not self._user else " in the user's own store"
            mem = Memory(chosen, kind, description, body)
            held = held_why(Put(mem))
            if store.config.review == "ask" or held is not None:
                land(store, [Put(mem, reason="remembered through MCP")], source=self.source,
                     summary=f"remember {chosen}", secrets="refuse")  # fmt: skip
                if held is not None:
                    return (
                        f"Not saved: {chosen} reads as an instruction to an agent"
                        f" ({held.removeprefix('held: ')}); it waits for the user's review"
                        " ('memdir review' or 'memdir ui')."
                    )
                return (
                    f"Proposed memory {chosen}{there}: it waits for the user's review"
                    " ('memdir review' or 'memdir ui') before it is saved."
                )
            before = store.get(chosen).digest if existed else None
            saved = store.write(
                chosen,
                type=kind,
                description=description,
                body=body,
                source=self.source,
                reason="remembered through MCP",
            )
            if existed and saved.digest == before:
                return f"Unchanged: memory {saved.name}{there} already says exactly this."
            done = f"{'Updated' if existed else 'Saved'} memory {saved.name}{there}."
            if kind in STANDING_TYPES:  # an agent's words: recalled, but not the user's rule yet
                done += (
                    " It is not the user's rule: it is recalled and stands at session start"
                    " only once the user accepts it in their own terminal"
                    f" ('memdir accept {saved.name}')."
                )
            return done

        return self.call(run)

    def edit(
        self,
        old: str,
        new: str,
        name: str | None = None,
        id: str | None = None,
        memory: str | None = None,
    ) -> str:
        which = str(pick("name", name, id, memory))
        return self.call(lambda: self._edit(which, old, new))

    def _edit(self, which: str, old: str, new: str) -> str:
        store, real = self.target(which)
        current = store.get(real)
        for field in ("body", "description"):
            value: str = getattr(current, field)
            found = lines_of(value, old)
            count = len(found)
            if count > 1:
                lines = sorted(set(found[:10]))
                more = ", …" if count > 10 else ""
                raise ToolError(
                    f"'old' appears {count} times in the {field} of {which}"
                    f" (lines {', '.join(map(str, lines))}{more}) — include more surrounding"
                    " text so it is unique"
                )
            if count == 1:
                changed = current.replace(**{field: value.replace(old, new, 1)})
                put = Put(
                    changed, reason="edited through MCP", expect=current.digest, merge_extra=False
                )
                landed = land(
                    store, [put], source=self.source, summary=f"edit {real}", secrets="refuse"
                )
                if landed.operation is None:
                    return self._waits(f"The edit of {which}", landed)
                return f"Edited the {field} of {which}."
        raise ToolError(f"'old' does not occur in {which} — read it first and copy the exact text")

    def forget(
        self,
        reason: str = "",
        name: str | None = None,
        id: str | None = None,
        memory: str | None = None,
    ) -> str:
        which = str(pick("name", name, id, memory))

        def run() -> str:
            store, real = self.target(which)
            gone = Remove(
                real, reason=reason or "forgotten through MCP", expect=store.get(real).digest
            )
            landed = land(store, [gone], source=self.source, summary=f"forget {real}")
            if landed.operation is None:
                return self._waits(f"Forgetting {which}", landed)
            return f"Forgot {which}; restore with name {which!r} brings it back."

        return self.call(run)

    @staticmethod
    def _waits(what: str, landed: Landed) -> str:
        """What the agent is told of a change kept for the user's review (``review = "ask"``,
        or a text that reads as an instruction to an agent)."""
        why = f" ({landed.held[0].removeprefix('held: ')})" if landed.held else ""
        return (
            f"{what} waits for the user's review{why} ('memdir review' or 'memdir ui'):"
            " nothing is changed until the user approves it."
        )

    def history(
        self, name: str | None = None, id: str | None = None, memory: str | None = None
    ) -> str:
        which = str(pick("name", name, id, memory))

        def run() -> str:
            store, real = self.target(which, write=False)
            versions = store.history(real)
            if not versions and real not in store:
                store.get(real)  # the same "no memory named …" error as read
            if not versions:
                return f"No history for {which}."
            by = {op.id: op.source for op in store.log()}
            return "\n".join(
                f"v{v.version} {v.time} {v.action}"
                + (f" — {one_line(v.reason)}" if v.reason else "")
                + (f" (by {one_line(by[v.op])})" if by.get(v.op) else "")
                for v in versions
            )

        return self.call(run)

    def restore(
        self,
        name: str | None = None,
        id: str | None = None,
        memory: str | None = None,
        version: int | None = None,
    ) -> str:
        which = str(pick("name", name, id, memory))

        def run() -> str:
            store, real = self.target(which)
            put, summary = restoring(store, real, version)
            # (an earlier text of the store's own: kept as it was)
            landed = land(store, [put], source=self.source, summary=summary, secrets="allow")
            if landed.operation is None:
                return self._waits(f"Restoring {which}", landed)
            return f"Restored {which}."

        return self.call(run)

    # -- the resources ------------------------------------------------------------------------

    def index(self) -> str:
        """The memory index of every scope (names and descriptions, the project's first),
        without what is held for review."""
        cfg = self.config
        return self.resource(
            lambda: index_section(self.scopes(), cfg.index_max_lines, cfg.index_max_bytes)
        )

    def standing(self) -> str:
        """The standing memories and the index, as a host gets them at session start."""
        from ..standing import session_start

        return self.resource(lambda: session_start(self.scopes(), self.config).text)

    def memory_file(self, name: str) -> str:
        return self.resource(lambda: as_read(self.scopes(), name))

    def resource(self, fn: Callable[[], str]) -> str:
        """Read one resource as ``call`` runs a tool; a missing memory is the protocol's
        resource-not-found error, not an internal one."""
        try:
            return self.call(fn)
        except ToolError as exc:
            missing = isinstance(exc.__context__, MemoryNotFound)
            raise (ResourceNotFoundError if missing else ResourceError)(str(exc)) from None
