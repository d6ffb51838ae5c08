"""The routes of ``memdir ui``: every page reads the stores in scope, every form changes them
through ``Store`` (history kept, secrets screened, MEMORY.md current, undo works).

This module does NOT check who is asking (``access`` does) or start the server (``cli_ui``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from memdir import memory as memfmt
from memdir import review as queue
from memdir.config import Config
from memdir.episodes import Turn
from memdir.errors import MemdirError
from memdir.gate.decisions import active
from memdir.gate.instructions import screen
from memdir.gate.provenance import ORIGIN_CLAIMS
from memdir.policy import Policy
from memdir.recalllog import entries as recall_entries
from memdir.scopes import Scopes
from memdir.standing import accept_as_users, waiting
from memdir.store import Store, readable
from memdir.usage import UsageLog
from memdir_ui.access import Access
from memdir_ui.charts import growth_chart, usage_chart
from memdir_ui.shown import (
    Event,
    Row,
    ShownRecall,
    Use,
    back_to,
    explain_hit,
    frontmatter_of,
    markdown,
    recalled_line,
    turns_in,
    unused_since,
    uses_in,
    version_diff,
)

HERE = Path(__file__).parent
PAGE = 100  # memories per page
HOW = {"llm": "the model's pick", "search": "search", "search-fallback": "search (model failed)"}


class UI:
    """The stores and pages of one running ``memdir ui``."""

    def __init__(
        self,
        scopes: Scopes,
        access: Access,
        config: Callable[[], Config] | None = None,
        also: tuple[str, ...] = (),
    ) -> None:
        self.scopes = scopes
        self.access = access
        self._config, self._also = config, also
        self.lock = threading.Lock()  # one page at a time touches the stores
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.globals["markdown"] = markdown

    # -- helpers ---------------------------------------------------------------------------

    def fresh(self) -> None:
        """The stores opened again when the configuration in force (``config``: the project's
        and the user's config.toml, read at each page) is not the one they were opened with."""
        if self._config is None:
            return
        now = self._config()
        with self.lock:
            if now != self.scopes.config:
                old, self.scopes = self.scopes, Scopes(now, also=self._also, watch=None)
                old.close()

    def page(self, request: Request, template: str, status: int = 200, **data: Any) -> Response:
        data.update(
            request=request,
            csrf=self.access.csrf,
            waiting=sum(queue.waiting(st) for _, st in self._writable()),
            nav=template.split(".")[0],
        )
        return self.templates.TemplateResponse(request, template, data, status_code=status)

    def _writable(self) -> list[tuple[str, Store]]:
        return [(sc.name, st) for sc, st in self.scopes.stores() if not st.read_only]

    def _store(self, scope: str) -> Store:
        found = self.scopes.scope(scope).store
        if found is None:
            raise MemdirError(f"no {scope} store here")
        return found

    async def _form(self, request: Request) -> dict[str, str]:
        form = await request.form()
        if not self.access.form_ok(form.get("csrf")):
            raise PermissionError("this form did not come from memdir ui — reload the page")
        return {k: v for k, v in form.items() if isinstance(v, str)}

    # -- memories --------------------------------------------------------------------------

    async def memories(self, request: Request) -> Response:
        q = request.query_params
        query, scope, kind = q.get("q", "").strip(), q.get("scope", ""), q.get("type", "")
        stale = q.get("stale", "")
        stale_days = int(stale) if stale.isdigit() and int(stale) > 0 else 0
        explain = q.get("explain") == "1"
        with self.lock:
            if query:
                rows = [
                    Row(h.scope or "", h.entry, h.name, h.score, explain_hit(h) if explain else "")
                    for h in self.scopes.search(query, 50, explain=explain)
                ]
            else:
                rows = [Row(sc.name, e, shown) for sc, e, shown in self.scopes.located()]
                rows.sort(key=lambda r: r.entry.updated or r.entry.created or "", reverse=True)
            types = sorted({r.entry.type for r in rows} | set(self.scopes.config.types))
            held = Policy(self.scopes).held()
            waits = {name for name, _ in waiting(self.scopes)}
            used = self._uses()
            stands = set(self._standing_names()) if q.get("stands") == "1" else set()
        week = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 7 * 86400))
        rows = [
            r
            for r in rows
            if (not scope or r.scope == scope)
            and (not kind or r.entry.type == kind)
            and (q.get("pinned") != "1" or r.entry.pinned)
            and (q.get("conflicted") != "1" or r.entry.conflicted)
            and (q.get("week") != "1" or (r.entry.updated or r.entry.created or "") >= week)
            and (q.get("stands") != "1" or r.shown in stands)
            and (not stale_days or unused_since(used.get(r.shown), stale_days))
        ]
        number = max(1, int(q.get("page", "1") or 1)) if q.get("page", "1").isdigit() else 1
        shown = rows[(number - 1) * PAGE : number * PAGE]
        more = {k: v for k, v in q.items() if k != "page"}
        return self.page(
            request,
            "memories.html",
            rows=shown,
            held=held,
            waits=waits,
            used=used,
            stale=stale_days,
            total=len(rows),
            query=query,
            scope=scope,
            kind=kind,
            types=types,
            scopes=[sc.name for sc, _ in self.scopes.stores()],
            params=q,
            explain=explain,
            note=self.scopes.ranking_note() if explain and query else "",
            number=number,
            prev=urlencode({**more, "page": number - 1}) if number > 1 else None,
            next=urlencode({**more, "page": number + 1}) if number * PAGE < len(rows) else None,
        )

    async def memory(self, request: Request) -> Response:
        scope, name = request.path_params["scope"], request.path_params["name"]
        return self._memory_page(request, scope, name)

    def _memory_page(
        self,
        request: Request,
        scope: str,
        name: str,
        *,
        error: str = "",
        draft: dict[str, str] | None = None,
        status: int = 200,
    ) -> Response:
        q = request.query_params
        with self.lock:
            store = self._store(scope)
            versions = store.history(name) if memfmt.valid_name(name) is not None else []
            mem = readable(store, name)
            if mem is None and not versions:
                return self.page(request, "missing.html", status=404, name=name, scope=scope)
            a, b = q.get("a", ""), q.get("b", "")
            diff = version_diff(store, name, mem, a, b) if a and b else None
            shown = self._shown(scope, name)
            origin = self._origin(shown) if mem is not None else ""
            held = mem is not None and shown in Policy(self.scopes).held()
            use = self._uses().get(shown)
            waits = mem is not None and shown in {n for n, _ in waiting(self.scopes)}
            orders = screen(f"{mem.description}\n{mem.body}") if waits and mem else None
        writable = [s for s, _ in self._writable() if s != scope]
        return self.page(
            request,
            "memory.html",
            status=status,
            scope=scope,
            name=name,
            mem=mem,
            text=memfmt.dumps(mem) if mem is not None else "",
            front=frontmatter_of(mem),
            versions=list(reversed(versions)),
            diff=diff,
            a=a,
            b=b,
            done=q.get("done", ""),
            error=error,
            draft=draft,
            read_only=store.read_only,
            origin=origin,
            use=use,
            held=held,
            waits=waits,
            orders=orders,
            claims=sorted(k for k in mem.extra if k.lower() in ORIGIN_CLAIMS) if mem else [],
            move_to=writable,
            types=sorted(set(self.scopes.config.types) | ({mem.type} if mem else set())),
        )

    def _uses(self) -> dict[str, Use]:
        """How each memory was used, from the recall logs of the stores written here."""
        return uses_in([store for _, store in self._writable()])

    def _standing_names(self) -> tuple[str, ...]:
        """The memories that stand at a session start now."""
        from memdir.standing import session_start

        return session_start(self.scopes, self.scopes.config).names

    def _shown(self, scope: str, name: str) -> str:
        """The name the catalogue shows for ``name`` of ``scope`` (qualified when two scopes
        hold different memories of that name)."""
        for sc, e, shown in self.scopes.located():
            if sc.name == scope and e.name == name:
                return shown
        return name

    def _origin(self, shown: str) -> str:
        """Where the memory's current text came from, as memdir's own log says."""
        try:
            return self.scopes.origin(shown).label
        except (MemdirError, LookupError, OSError):
            return "unknown"

    async def act(self, request: Request) -> Response:
        """A form on a memory's page: edit, pin, unpin, move, forget, restore."""
        scope, name, action = (request.path_params[k] for k in ("scope", "name", "action"))
        try:
            form = await self._form(request)
        except PermissionError as exc:
            return PlainTextResponse(str(exc), status_code=403)
        done, error, draft = "", "", None
        with self.lock:
            store = self._store(scope)
            try:
                if action == "edit":
                    if name in store and not form.get("digest"):
                        raise MemdirError(
                            "this form does not say which version it edits — reload the"
                            " page and make the change again"
                        )
                    store.write(
                        name,
                        type=form.get("type", ""),
                        description=form.get("description", ""),
                        body=form.get("body", "").replace("\r\n", "\n"),
                        expect=form.get("digest") or None,
                        source="ui",
                        reason="edited in memdir ui",
                    )
                    done = "Saved."
                elif action in ("pin", "unpin"):
                    store.set_pinned(name, action == "pin", source="ui")
                    done = "Pinned." if action == "pin" else "Unpinned."
                elif action == "move":
                    to = form.get("to", "")
                    self.scopes.move(name, scope, to, source="ui")
                    return back_to(f"/memory/{quote(to)}/{quote(name)}", f"Moved to {to}.")
                elif action == "accept":  # the text the page showed, and only that
                    if not form.get("digest"):
                        raise MemdirError(
                            "this form does not say which text it accepts — reload the page"
                            " and look at it again"
                        )
                    shown = self._shown(scope, name)
                    if active(store.root, name, store.get(name).digest) is not None:
                        raise MemdirError(
                            "it is held for review (it came from elsewhere): approve it in"
                            " Review first, then accept it"
                        )
                    accept_as_users(self.scopes, shown, form.get("digest"))
                    done = "Accepted as your own: it stands at the start of every session."
                elif action == "forget":
                    store.delete(name, reason="forgotten in memdir ui", source="ui")
                    done = "Forgotten (kept in history: restore it below)."
                elif action == "restore":
                    number = int(form.get("version", "0"))
                    store.restore(name, number, source="ui")
                    done = f"Restored version {number}."
                else:
                    return PlainTextResponse("unknown action", status_code=404)
            except (MemdirError, ValueError) as exc:
                draft = form if action == "edit" else None
                error = str(exc)
        if done:
            return back_to(f"/memory/{quote(scope)}/{quote(name)}", done)
        return self._memory_page(request, scope, name, error=error, draft=draft, status=409)

    # -- review ----------------------------------------------------------------------------

    async def review(self, request: Request) -> Response:
        with self.lock:
            waiting = [
                (scope, p, [(i, queue.diff(store, i)) for i in p.pending])
                for scope, store in self._writable()
                for p in queue.proposals(store)
            ]
            mode = {scope: store.config.review for scope, store in self._writable()}
            existing = {
                scope: {e.name for e in store.entries()} for scope, store in self._writable()
            }
            proposed = {(s, i.name) for s, p, items in waiting for i, _ in items}
            rules = self._waiting_rules(proposed)
        return self.page(
            request,
            "review.html",
            proposals=waiting,
            rules=rules,
            mode=mode,
            existing=existing,  # a proposal's name links to a memory only when there is one
            done=request.query_params.get("done", ""),
        )

    def _waiting_rules(self, proposed: set[tuple[str, str]]) -> list[dict[str, str]]:
        """What else waits for the person: rules from elsewhere that wait for acceptance
        (``standing.waiting``) and texts held back from recall that no proposal holds (a
        door's arrival under ``review = "ask"``), each with the text it would accept."""
        out = []
        held = Policy(self.scopes).held()
        names = {shown: why for shown, why in waiting(self.scopes)}
        names.update({shown: "held for review" for shown in held if shown not in names})
        for shown, why in names.items():
            scope, name = self.scopes.locate(shown)
            if (scope.name, name) in proposed or scope.store is None or not scope.writable:
                continue
            mem = self.scopes.get(shown)
            arrival = active(scope.store.root, name, mem.digest) is not None
            out.append(
                {"scope": scope.name, "name": name, "from": why, "digest": mem.digest or "",
                 "text": mem.body.strip() or mem.description, "held": str(arrival)}
            )  # fmt: skip
        return out

    async def decide(self, request: Request) -> Response:
        scope, pid, verb = (request.path_params[k] for k in ("scope", "pid", "verb"))
        if verb not in ("approve", "reject"):
            return PlainTextResponse("unknown action", status_code=404)
        try:
            form = await self._form(request)
        except PermissionError as exc:
            return PlainTextResponse(str(exc), status_code=403)
        left: list[int] = []  # orders to an agent an "approve all" leaves for one by one
        with self.lock:
            store = self._store(scope)
            try:
                proposal = queue.get(store, pid)
                picked = (
                    [int(form["item"])] if "item" in form else [i.index for i in proposal.pending]
                )
                if "item" not in form and verb == "approve":  # never an order in a bulk
                    left = [i for i in picked if queue.order_in(proposal.items[i]) is not None]
                    picked = [i for i in picked if i not in left]
                for index in picked:
                    edited = None
                    item = proposal.items[index]
                    if verb == "approve" and item.memory is not None and "description" in form:
                        edited = item.memory.replace(
                            name=(form.get("name") or item.memory.name).strip(),
                            description=form["description"],
                            body=form.get("body", "").replace("\r\n", "\n"),
                        )
                    queue.decide(
                        store, pid, index, approve=verb == "approve", edited=edited, source="ui"
                    )
            except (MemdirError, ValueError, KeyError, IndexError) as exc:
                return back_to("/review", f"Not done: {exc}")
        word = "Approved" if verb == "approve" else "Rejected"
        done = f"{word} {len(picked)} change{'s' if len(picked) != 1 else ''}."
        if left:
            done += (
                f" Left: {', '.join(proposal.items[i].name for i in left)} — each reads as an"
                " instruction to an agent; approve it on its own if it is truly yours."
            )
        return back_to("/review", done)

    # -- activity and recalls --------------------------------------------------------------

    async def activity(self, request: Request) -> Response:
        with self.lock:
            events: list[Event] = []
            usage = []
            for scope, store in self._writable():
                for op in store.log(limit=300):
                    changes = [(c["action"], c["name"], c.get("reason") or "") for c in op.changes]
                    events.append(Event(op.time, scope, op.source, op.summary, changes, "change"))
                for e in recall_entries(store.internal, 100):
                    events.append(
                        Event(e["time"], scope, e["source"], recalled_line(e), [], "recall")
                    )
                usage += UsageLog(store.internal / "usage.jsonl").totals()
            entries = [e for _, e, _ in self.scopes.located()]
        events.sort(key=lambda e: e.time, reverse=True)
        return self.page(
            request,
            "activity.html",
            events=events[:300],
            growth=growth_chart(entries),
            usage=usage_chart(usage),
        )

    async def recalls(self, request: Request) -> Response:
        with self.lock:
            rows: list[ShownRecall] = [
                {**e, "store": scope}
                for scope, store in self._writable()
                for e in recall_entries(store.internal, 300)
            ]
            said = self._turns()
        rows.sort(key=lambda e: e["time"], reverse=True)
        return self.page(request, "recalls.html", rows=rows[:300], how=HOW, said=said)

    def _turns(self) -> dict[str, Turn]:
        """The kept turns of the stores written here, by their ref (what a recall names)."""
        return turns_in([store for _, store in self._writable()])


def build_app(
    scopes: Scopes,
    access: Access,
    config: Callable[[], Config] | None = None,
    also: tuple[str, ...] = (),
) -> Starlette:
    """The ASGI app of ``memdir ui`` over ``scopes``; with ``config`` (the configuration in
    force now), opened again with ``also`` when that changes."""
    ui = UI(scopes, access, config, also)

    async def root(request: Request) -> Response:
        return RedirectResponse("/memories", status_code=303)

    async def failed(request: Request, exc: Exception) -> Response:
        return PlainTextResponse(f"memdir ui: {exc}".splitlines()[0], status_code=400)

    routes = [
        Route("/", root),
        Route("/memories", ui.memories),
        Route("/memory/{scope}/{name}", ui.memory),
        Route("/memory/{scope}/{name}/{action}", ui.act, methods=["POST"]),
        Route("/review", ui.review),
        Route("/review/{scope}/{pid}/{verb:str}", ui.decide, methods=["POST"]),
        Route("/activity", ui.activity),
        Route("/recalls", ui.recalls),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    Next = Callable[[Request], Awaitable[Response]]

    async def dispatch(request: Request, call_next: Next) -> Response:
        async def fresh(admitted: Request) -> Response:
            ui.fresh()  # (a caller without the link opens nothing)
            return await call_next(admitted)

        return await access(request, fresh)

    return Starlette(
        routes=routes,
        middleware=[Middleware(BaseHTTPMiddleware, dispatch=dispatch)],
        exception_handlers={MemdirError: failed},
    )
