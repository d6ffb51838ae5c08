"""The PostgreSQL side of a database store: connecting (psycopg 3, ``memdir[postgres]``,
imported only here), the tables, and the one function that finds a store's row.

Tables (one set per database, shared by every store in it; ``store`` is the store's id):
``memdir_stores`` (name, the change counter ``seq``, BM25's document and token counts),
``memdir_memories`` (one row per memory: its canonical file text and the fields read from it,
its index terms), ``memdir_postings`` (term -> memory, what BM25 gathers candidates from),
``memdir_terms`` (document frequency per term), ``memdir_vectors`` (pgvector
embeddings by model), ``memdir_history`` (every overwritten or retired version's text) and
``memdir_log`` (every applied operation, numbered by ``seq``).
This module does NOT know memories' rules (``memory``, ``transaction`` do).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from memdir.errors import ConfigError, MemdirError

if TYPE_CHECKING:
    from memdir.config import Config

log = logging.getLogger("memdir")

if TYPE_CHECKING:
    import psycopg

SCHEMA_VERSION = 2
CHANNEL = "memdir"  # NOTIFY channel; the payload is "<store id> <seq>"

_TABLES = """
CREATE TABLE IF NOT EXISTS memdir_schema (version int NOT NULL);
CREATE TABLE IF NOT EXISTS memdir_stores (
    id serial PRIMARY KEY,
    name text UNIQUE NOT NULL,
    seq bigint NOT NULL DEFAULT 0,
    docs bigint NOT NULL DEFAULT 0,
    tokens bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS memdir_memories (
    store int NOT NULL REFERENCES memdir_stores(id) ON DELETE CASCADE,
    name text NOT NULL,
    skeleton text NOT NULL,
    text text NOT NULL,
    digest text NOT NULL,
    type text NOT NULL,
    description text NOT NULL,
    created text,
    updated text,
    pinned boolean NOT NULL DEFAULT false,
    warnings text[] NOT NULL DEFAULT '{}',
    seq bigint NOT NULL,
    terms text[] NOT NULL,
    tok_name text NOT NULL,
    tok_description text NOT NULL,
    tok_body text NOT NULL,
    length int NOT NULL,
    embed_digest bytea NOT NULL,
    PRIMARY KEY (store, name)
);
DROP INDEX IF EXISTS memdir_memories_terms;
CREATE INDEX IF NOT EXISTS memdir_memories_skeleton ON memdir_memories (store, skeleton);
CREATE INDEX IF NOT EXISTS memdir_memories_seq ON memdir_memories (store, seq);
CREATE TABLE IF NOT EXISTS memdir_postings (
    store int NOT NULL REFERENCES memdir_stores(id) ON DELETE CASCADE,
    term text NOT NULL,
    name text NOT NULL,
    PRIMARY KEY (store, term, name)
);
CREATE TABLE IF NOT EXISTS memdir_terms (
    store int NOT NULL REFERENCES memdir_stores(id) ON DELETE CASCADE,
    term text NOT NULL,
    df bigint NOT NULL,
    PRIMARY KEY (store, term)
);
CREATE TABLE IF NOT EXISTS memdir_vectors (
    store int NOT NULL REFERENCES memdir_stores(id) ON DELETE CASCADE,
    name text NOT NULL,
    model text NOT NULL,
    dim int NOT NULL,
    digest bytea NOT NULL,
    embedding vector NOT NULL,
    PRIMARY KEY (store, name, model)
);
CREATE TABLE IF NOT EXISTS memdir_history (
    store int NOT NULL REFERENCES memdir_stores(id) ON DELETE CASCADE,
    name text NOT NULL,
    version int NOT NULL,
    time text NOT NULL,
    action text NOT NULL,
    reason text NOT NULL,
    op text NOT NULL,
    text text NOT NULL,
    PRIMARY KEY (store, name, version)
);
CREATE TABLE IF NOT EXISTS memdir_log (
    store int NOT NULL REFERENCES memdir_stores(id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    id text NOT NULL,
    time text NOT NULL,
    source text NOT NULL,
    summary text NOT NULL,
    changes jsonb NOT NULL,
    undoes text,
    PRIMARY KEY (store, seq)
);
"""


def driver() -> Any:
    """The psycopg module; ConfigError saying how to install it when it is missing."""
    try:
        import psycopg
    except ImportError:
        raise ConfigError(
            "a database_url is set but the PostgreSQL driver is not installed — run"
            " pip install 'memdir[postgres]'"
        ) from None
    if not _QUIET:  # the driver's own notes on connections it gave up ("error ignored
        # terminating …") go nowhere: memdir says in one line what a failure means
        logging.getLogger("psycopg").addHandler(logging.NullHandler())
        _QUIET.append(True)
    return psycopg


_QUIET: list[bool] = []


def shown(url: str) -> str:
    """The URL without its password, as messages and file names may show it; never raises
    (a password may hold '#', '/', '?' or '@', which a URL parser reads as structure)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "the database URL (not of the form postgresql://…)"
    userinfo, at, where = rest.rpartition("@")  # the last '@': a password may hold one
    user = userinfo.split(":", 1)[0] if at else ""
    try:
        parts = urlsplit(f"{scheme}://{where}")
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        if parts.port:
            host += f":{parts.port}"
        path = parts.path
    except ValueError:
        host, path = where.split("/", 1)[0].split("?", 1)[0], ""
    return urlunsplit((scheme, (f"{user}@" if user else "") + host, path, "", ""))


@contextlib.contextmanager
def explained(url: str) -> Iterator[None]:
    """The driver's failures inside as memdir's one-line errors: a lost connection (a server
    restarted or shut down: the next call reconnects), a value the database refuses."""
    pg = driver()
    try:
        yield
    except pg.OperationalError as exc:
        raise MemdirError(
            f"the connection to {shown(url)} was lost ({_first(exc)}) — nothing was changed;"
            " try again (memdir reconnects)"
        ) from None
    except pg.Error as exc:
        raise MemdirError(f"{shown(url)} refused the request ({_first(exc)})") from None


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def connect(url: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
    """A connection to ``url``; MemdirError in one line when the server cannot be reached."""
    pg = driver()
    try:
        conn: psycopg.Connection[Any] = pg.connect(
            url, autocommit=autocommit, connect_timeout=10, application_name="memdir"
        )
    except pg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MemdirError(
            f"cannot connect to {shown(url)} ({first}) — check database_url and that the"
            " server is running"
        ) from None
    return conn


def ensure_schema(conn: psycopg.Connection[Any]) -> None:
    """Create the tables (and pgvector) once per database; safe when many processes race."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("schema"),))
        row = conn.execute("SELECT to_regclass('memdir_schema') IS NOT NULL").fetchone()
        if row and row[0]:
            have = conn.execute("SELECT max(version) FROM memdir_schema").fetchone()
            if have and have[0] == SCHEMA_VERSION:
                return
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except Exception as exc:
            raise MemdirError(
                f"the database has no pgvector extension ({str(exc).splitlines()[0]}) —"
                " install pgvector on the server, or ask its owner to CREATE EXTENSION vector"
            ) from None
        had = bool(row and row[0]) and conn.execute(
            "SELECT to_regclass('memdir_postings') IS NULL"
        ).fetchone() == (True,)
        conn.execute(_TABLES)
        if had:  # version 1 found candidates through a GIN index: fill the postings
            conn.execute(
                "INSERT INTO memdir_postings (store, term, name)"
                " SELECT store, unnest(terms), name FROM memdir_memories ON CONFLICT DO NOTHING"
            )
        conn.execute("DELETE FROM memdir_schema")
        conn.execute("INSERT INTO memdir_schema VALUES (%s)", (SCHEMA_VERSION,))


def lock_key(*parts: object) -> int:
    """A 64-bit advisory-lock key for ``parts``."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def store_id(conn: psycopg.Connection[Any], name: str, *, create: bool) -> int | None:
    """The id of the store called ``name`` (made when ``create``); None when absent."""
    with conn.transaction():
        row = conn.execute("SELECT id FROM memdir_stores WHERE name = %s", (name,)).fetchone()
        if row is None and create:
            row = conn.execute(
                "INSERT INTO memdir_stores (name) VALUES (%s) ON CONFLICT (name) DO UPDATE"
                " SET name = EXCLUDED.name RETURNING id",
                (name,),
            ).fetchone()
    return None if row is None else int(row[0])


def state_dir(config: Config) -> Path:
    """This host's folder for a database store's local state (cursors, review, recall log)."""
    from memdir.config import folder

    assert config.database_url is not None
    key = hashlib.sha256(f"{shown(config.database_url)}\0{config.store}".encode())
    return folder("state") / "db" / key.hexdigest()[:16]


def working(conn: psycopg.Connection[Any], url: str, idle: bool) -> psycopg.Connection[Any]:
    """``conn``, or a new connection when it is closed or broken; one left unused a while
    (``idle``) is looked at first (a server restarted meanwhile answers its first use with a
    broken connection: a long-lived server reconnects instead of failing a call)."""
    if not conn.closed and not conn.broken and idle:
        try:
            conn.execute("SELECT 1")
        except driver().Error:
            pass  # conn.broken says so now
    if conn.closed or conn.broken:
        try:
            conn.close()
        except driver().Error as exc:  # (it is broken: a new one replaces it)
            log.info("memdir: closing a broken database connection: %s", exc)
        conn = connect(url, autocommit=True)
    return conn
