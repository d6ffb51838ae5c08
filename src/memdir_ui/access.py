"""Who may use ``memdir ui``: the browser that opened the one-time link, through this server's
own address, with forms from its own pages.

The link ``memdir ui`` prints carries a token that is good once: it is traded for a session
cookie (HttpOnly, SameSite=Strict) and the browser is sent on to the same page without it, so
the token is neither kept in history nor sent anywhere. Every request must name this server in
``Host`` (a DNS-rebinding page cannot reach it), an ``Origin`` header must be this server's own,
and every form carries a value derived from the session that another site cannot know.
This module does NOT render pages.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable
from html import escape as html_escape
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

COOKIE = "memdir_ui"
HEADERS = {
    "content-security-policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:;"
        " form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",  # (no-referrer would make a form's Origin "null")
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
}


class Access:
    """The token, the session and the checks of one running ``memdir ui``."""

    def __init__(self, port: int, token: str | None = None) -> None:
        self.port = port
        self.token: str | None = token or secrets.token_urlsafe(32)
        self.session = secrets.token_urlsafe(32)
        self.csrf = hmac.new(self.session.encode(), b"forms", "sha256").hexdigest()
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
        self.origins = {f"http://127.0.0.1:{port}", f"http://localhost:{port}"}

    @property
    def link(self) -> str:
        """The one-time link to open (None once used)."""
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    def form_ok(self, value: object) -> bool:
        return isinstance(value, str) and hmac.compare_digest(value, self.csrf)

    async def __call__(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await self._check(request, call_next)
        for key, value in HEADERS.items():
            response.headers.setdefault(key, value)
        return response

    async def _check(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        host = request.headers.get("host", "").lower()
        if host not in self.hosts:
            return PlainTextResponse(
                "unknown Host — open the link 'memdir ui' printed (127.0.0.1)", status_code=421
            )
        origin = request.headers.get("origin")
        if origin is not None and origin.rstrip("/").lower() not in self.origins:
            return PlainTextResponse("requests from other sites are refused", status_code=403)
        given = request.query_params.get("token")
        cookie = request.cookies.get(COOKIE, "")
        known = hmac.compare_digest(cookie.encode(), self.session.encode())
        if given is not None:
            if known:  # the printed link again (a reload, a second click): the page
                return RedirectResponse(page_here(request), status_code=303)
            return self._trade(request, given)
        if not known:
            return PlainTextResponse(
                "this browser has no key — open the link 'memdir ui' printed"
                " (restart 'memdir ui' for a new one)",
                status_code=401,
            )
        return await call_next(request)

    def _trade(self, request: Request, given: str) -> Response:
        """The one-time token for a session cookie, then the same page without the token."""
        token = self.token
        if token is None or not hmac.compare_digest(given.encode(), token.encode()):
            return PlainTextResponse(
                "this link was used already or is wrong — restart 'memdir ui' for a new one",
                status_code=401,
            )
        self.token = None
        # a page of this server (not a redirect): the browser then asks for it from this
        # site, so the SameSite=Strict cookie goes along even when the link was opened from
        # a file
        target = html_escape(page_here(request), quote=True)
        response = HTMLResponse(
            f'<!doctype html><meta http-equiv="refresh" content="0;url={target}">'
            f'<title>memdir</title><a href="{target}">Open memdir</a>'
        )
        response.set_cookie(COOKIE, self.session, httponly=True, samesite="strict", path="/")
        return response


def page_here(request: Request) -> str:
    """The page asked for, without the token, as a path of this server only (never
    ``//other.example``: the browser is sent nowhere else)."""
    rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
    path = "/" + request.url.path.lstrip("/\\")
    return path + ("?" + urlencode(rest) if rest else "")
