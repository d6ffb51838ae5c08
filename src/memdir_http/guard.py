"""Who may talk to ``memdir mcp --http``: a bearer token, the Host and the Origin.

Every request must carry ``Authorization: Bearer <token>``; its ``Host`` header must name this
server (loopback names, the address it was bound to, this machine's names, and any host the
user listed) so a DNS-rebinding page cannot reach it; an ``Origin`` header, which browsers
send, must be one the user listed exactly. The token is given (``--token``,
``MEMDIR_MCP_TOKEN``) or, on loopback only, generated once and kept owner-only in the user's
configuration folder. This module does NOT serve anything: it wraps an ASGI app.
"""

from __future__ import annotations

import hmac
import secrets
import socket
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from pathlib import Path
from typing import Any

from memdir.disk.atomic import write_atomic
from memdir.errors import ConfigError

TOKEN_FILE = "mcp-token"
MIN_TOKEN = 16
LOOPBACK = ("127.0.0.1", "localhost", "::1")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def resolve_token(given: str | None, host: str, home: Path) -> tuple[str, Path | None, bool]:
    """The token to require, where it is kept (None: given), and whether it was just made.
    Beyond loopback a token must be given; a given token must be long enough to guess."""
    if given:
        if len(given) < MIN_TOKEN:
            raise ConfigError(
                f"the token is {len(given)} characters — give one of at least"
                f" {MIN_TOKEN} (python -c 'import secrets;"
                " print(secrets.token_urlsafe())')"
            )
        return given, None, False
    if host not in LOOPBACK:
        raise ConfigError(
            f"serving on {host} reaches beyond this machine — pass --token (or"
            " set MEMDIR_MCP_TOKEN) with a secret of your own"
        )
    path = home / TOKEN_FILE
    try:
        kept = path.read_text(encoding="utf-8").strip()
        if len(kept) >= MIN_TOKEN:
            return kept, path, False
    except OSError:
        pass
    token = secrets.token_urlsafe(32)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomic(path, (token + "\n").encode(), mode=0o600)
    return token, path, True


def allowed_hosts(host: str, port: int, extra: Iterable[str] = ()) -> set[str]:
    """The Host header values that name this server."""
    names = {"127.0.0.1", "localhost", "[::1]", *extra}
    if host not in ("0.0.0.0", "::"):
        names.add(f"[{host}]" if ":" in host else host)
    else:  # every interface: this machine's own names and addresses
        try:
            name, aliases, addresses = socket.gethostbyname_ex(socket.gethostname())
            names.update([name, socket.getfqdn(), *aliases, *addresses])
        except OSError:
            names.add(socket.gethostname())
    return {n.lower() for n in names} | {f"{n.lower()}:{port}" for n in names}


IDENTITY = "memdir.identity"  # the request's ``scope["state"]`` key for who made it


class Guard:
    """ASGI middleware: refuse a request without the token, from a foreign Host, or from a
    browser page whose Origin was not listed. With ``who`` (a team's server), the token is
    each person's own: ``who(token)`` names its identity (None: refused), which the request
    carries on (``scope["state"][IDENTITY]``)."""

    def __init__(
        self,
        app: App,
        token: str,
        hosts: set[str],
        origins: Iterable[str],
        who: Callable[[str], Any] | None = None,
    ) -> None:
        self.app = app
        self.token = token.encode()
        self.hosts = hosts
        self.origins = {o.rstrip("/").lower() for o in origins}
        self.who = who

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {
            k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])
        }
        refusal = self.check(headers)
        if refusal is None and self.who is not None:
            _, _, given = headers.get("authorization", "").partition(" ")
            identity = self.who(given.strip())
            if identity is None:
                refusal = 401, "unknown or revoked token — ask for one: memdir tokens add NAME"
            else:
                scope.setdefault("state", {})[IDENTITY] = identity
        if refusal is not None:
            status, text = refusal
            extra = [(b"www-authenticate", b'Bearer realm="memdir"')] if status == 401 else []
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"), *extra],
                }
            )
            await send({"type": "http.response.body", "body": text.encode()})
            return
        await self.app(scope, receive, send)

    def check(self, headers: dict[str, str]) -> tuple[int, str] | None:
        """None if the request may go on, else the status and a one-line reason."""
        if headers.get("host", "").lower() not in self.hosts:
            return 421, "unknown Host — connect through an address this server listens on"
        origin = headers.get("origin")
        if origin is not None and origin.rstrip("/").lower() not in self.origins:
            return 403, "Origin not allowed — start the server with --allow-origin " + origin
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.who is not None:
            return None  # whose token it is: ``who`` says
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), self.token
        ):
            return 401, "missing or wrong token — send 'Authorization: Bearer <token>'"
        return None
