"""A team's memory server: each request is someone, and sees only the stores they may use.

``Team`` knows the identities of one database (``store.pgteam``): it tells a bearer token's
owner (cached for ``TTL`` seconds, so a revoked token stops working within that time) and
keeps, per identity, a ``PersonMemory``: the ``MemoryServer`` tools over that person's
stores alone. Their home store (the one named after them, else their first write grant) is
the project scope, their other stores are scopes named after the store (``team:api-port``),
read-only where they may only read. Every store is opened on connections in the member role
with the person's store ids, so the database's row-level security holds each statement to
those stores whatever a tool asks. Writes are logged as ``mcp:<name>``.
This module does NOT check Host or Origin (``memdir_http.guard``) and does NOT register the tools
(``mcp``).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from pathlib import Path

from mcp.server.mcpserver.exceptions import ToolError

from memdir.config import Config
from memdir.errors import ConfigError, MemdirError
from memdir.integrations.mcp_memory import MemoryServer
from memdir.scopes import PROJECT, USER, Scope, Scopes
from memdir.store import Store
from memdir_postgres import pgschema, pgteam
from memdir_postgres.pg import PgStore
from memdir_postgres.pgteam import Identity

log = logging.getLogger("memdir.mcp")
TTL = 2.0  # seconds a token's owner is trusted before the database is asked again


class PersonMemory(MemoryServer):
    """The tools for one identity: its stores only, its name on every write."""

    def __init__(self, config: Config, identity: Identity, stores: dict[str, PgStore]) -> None:
        super().__init__(config)
        self.identity = identity
        self.client = identity.name
        writable = [name for name in identity.writable if name in stores]
        home: str | None = identity.name if identity.name in writable else None
        if home is None and writable:
            home = writable[0]
        self.home = home
        self._store = stores[home] if home is not None else None
        scopes = Scopes(dataclasses.replace(config, user_dir=Path("none")), scopes=())
        for name, store in sorted(stores.items(), key=lambda kv: kv[0] != home):
            label = PROJECT if name == home else name
            if label in (PROJECT, USER) and name != home:
                label = f"store:{name}"
            scopes.scopes.append(Scope(label, store.root, not store.read_only, store))
        self._scopes: Scopes | None = scopes
        self.team_scopes = scopes
        self.stores = stores

    @property
    def source(self) -> str:
        return f"mcp:{self.identity.name}"

    def store(self, *, create: bool = False) -> Store:
        if self._store is None:
            raise ToolError(
                f"{self.identity.name} may only read here ({', '.join(self.identity.readable)})"
                " — nothing can be saved without a write grant"
            )
        return self._store

    def scopes(self) -> Scopes:
        return self.team_scopes

    def scope_choices(self) -> tuple[str, ...]:
        return (PROJECT, USER, *self.identity.writable)

    def writable(self, where: str) -> Store:
        """The home store (for ``project`` and ``user``: a person's own store is their home)
        or a store this identity may write by name."""
        if where in (PROJECT, USER) or where == self.home:
            return self.store()
        if self.identity.may(where, "write") and where in self.stores:
            return self.stores[where]
        raise ToolError(f"{self.identity.name} may not write to {where!r}")

    def target(self, shown: str, *, write: bool = True) -> tuple[Store, str]:
        store, name = super().target(shown, write=False)
        if write and store.read_only:
            raise ToolError(
                f"{shown} is in the {store.config.store} store, which {self.identity.name}"
                " may only read"
            )
        return store, name

    def close(self) -> None:
        for store in self.stores.values():
            store.close()


class Team:
    """The identities of the database ``config`` names, and each one's tools."""

    def __init__(self, config: Config, *, root: Path | None = None) -> None:
        assert config.database_url is not None
        self.config = config
        self.root = root  # where per-host state of each store goes (default: the state folder)
        self._conn = pgschema.connect(config.database_url, autocommit=True)
        pgschema.ensure_schema(self._conn)
        pgteam.ensure(self._conn)
        self._mu = threading.Lock()
        self._known: dict[str, tuple[float, Identity | None]] = {}
        self._people: dict[Identity, PersonMemory] = {}

    def active(self) -> int:
        with self._mu:
            return pgteam.active(self._conn)

    def who(self, token: str) -> Identity | None:
        """The identity this bearer token belongs to (None: unknown or revoked)."""
        key = pgteam.digest(token)
        now = time.monotonic()
        with self._mu:
            seen = self._known.get(key)
            if seen is not None and now - seen[0] < TTL:
                return seen[1]
            try:  # a server restarted meanwhile: a new connection, else the token is refused
                assert self.config.database_url is not None
                self._conn = pgschema.working(self._conn, self.config.database_url, True)
                with pgschema.explained(self.config.database_url):
                    found = pgteam.who(self._conn, token)
            except MemdirError as exc:
                log.warning("memdir mcp: cannot tell whose token this is: %s", exc)
                return None
            self._known[key] = (now, found)
            return found

    def memory_for(self, identity: Identity) -> PersonMemory:
        """The tools of ``identity`` (opened on its first request, kept while its grants
        stay the same)."""
        with self._mu:
            person = self._people.get(identity)
            if person is not None:
                return person
            stale = [p for i, p in self._people.items() if i.name == identity.name]
            session = pgteam.session_sql(self._conn, identity)
        for old in stale:  # its grants changed: the old stores go
            old.close()
        stores: dict[str, PgStore] = {}
        for name, mode in identity.grants:
            config = dataclasses.replace(self.config, store=name)
            root = None if self.root is None else self.root / name
            stores[name] = PgStore(
                config,
                create=False,
                watch=True,
                root=root,
                session=session,
                read_only=mode != "write",
            )
        person = PersonMemory(self.config, identity, stores)
        with self._mu:
            for i in [i for i in self._people if i.name == identity.name]:
                del self._people[i]
            self._people[identity] = person
        return person

    def close(self) -> None:
        with self._mu:
            people = list(self._people.values())
            self._people.clear()
        for person in people:
            person.close()
        self._conn.close()


def for_server(config: Config, token: str | None) -> Team | None:
    """The team whose identities a server over ``config``'s database serves: one with
    identities (then a shared ``token`` is refused: each person sends their own), else None."""
    conn = pgschema.connect(config.database_url or "", autocommit=True)
    try:
        exists = conn.execute("SELECT to_regclass('memdir_identities') IS NOT NULL").fetchone()
        people = pgteam.active(conn) if exists and exists[0] else 0
    finally:
        conn.close()
    if not people:
        return None
    if token:
        raise ConfigError(
            "this database has identities ('memdir tokens list'): each client sends its own"
            " token — start the server without --token (and MEMDIR_MCP_TOKEN)"
        )
    return Team(config)
