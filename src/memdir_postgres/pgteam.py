"""The people and agents of a team's database: identities with tokens, and what each may do
to which store.

An identity is a name (``alice``, ``ci-bot``) with a token (shown once when it is made, kept
only as its SHA-256) and grants: ``read`` or ``write`` on named stores. A server that serves
identities opens each identity's stores on connections that ``SET ROLE memdir_member`` and
name the store ids the identity may read and write (``session_sql``): the tables' row-level
security policies then hide every other store's rows and refuse writes to them, so a bug in
one tool cannot reach another store. The table owner (the ``memdir`` command, single-person
servers) is not a member and is not restricted.
This module does NOT serve requests (``integrations.team``) and does NOT rank or write
memories.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memdir import memory as memfmt
from memdir.errors import ConfigError, ConflictError, MemdirError
from memdir_postgres import pgschema

if TYPE_CHECKING:
    import psycopg

MEMBER = "memdir_member"  # the role identity sessions take: row-level security applies to it
TOKEN_PREFIX = "mdt_"
MODES = ("read", "write")
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,39}")

# What a member session may do: the memory tables, through the policies below.
DATA_TABLES = (
    "memdir_stores",
    "memdir_memories",
    "memdir_postings",
    "memdir_terms",
    "memdir_vectors",
    "memdir_history",
    "memdir_log",
)
TEAM_TABLES = """
CREATE TABLE IF NOT EXISTS memdir_identities (
    name text PRIMARY KEY,
    hash text UNIQUE NOT NULL,
    created text NOT NULL,
    revoked text
);
CREATE TABLE IF NOT EXISTS memdir_grants (
    identity text NOT NULL REFERENCES memdir_identities(name) ON DELETE CASCADE,
    store text NOT NULL,
    mode text NOT NULL CHECK (mode IN ('read', 'write')),
    PRIMARY KEY (identity, store)
);
"""


def _ids(kind: str) -> str:
    """The store ids a member session may ``kind`` ("read", "write"): a missing setting is an
    error (a member session that named none sees nothing)."""
    return f"string_to_array(current_setting('memdir.{kind}'), ',')::int[]"


_POLICIES = ("read", "write", "insert", "update", "delete")


def policies_sql() -> str:
    """Row-level security for member sessions, and the role they take (idempotent)."""
    out = [
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'memdir_member')"
        " THEN CREATE ROLE memdir_member NOLOGIN NOBYPASSRLS; END IF; END $$;",
        "DO $$ BEGIN EXECUTE format('GRANT memdir_member TO %I', current_user); END $$;",
    ]
    for table in DATA_TABLES:
        col = "id" if table == "memdir_stores" else "store"
        read, write = f"{col} = ANY({_ids('read')})", f"{col} = ANY({_ids('write')})"
        out += [
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO memdir_member;",
            *(f"DROP POLICY IF EXISTS memdir_{p} ON {table};" for p in _POLICIES),
            # one policy per command, so that a read is one condition the planner can use
            # with the table's indexes (the stores read include the stores written)
            f"CREATE POLICY memdir_read ON {table} FOR SELECT TO memdir_member USING ({read});",
            f"CREATE POLICY memdir_insert ON {table} FOR INSERT TO memdir_member"
            f" WITH CHECK ({write});",
            f"CREATE POLICY memdir_update ON {table} FOR UPDATE TO memdir_member"
            f" USING ({write}) WITH CHECK ({write});",
            f"CREATE POLICY memdir_delete ON {table} FOR DELETE TO memdir_member USING ({write});",
        ]
    out.append("GRANT SELECT ON memdir_schema TO memdir_member;")
    return "\n".join(out)


@dataclass(frozen=True)
class Identity:
    """Someone the server knows: a name, and ``(store, mode)`` grants."""

    name: str
    grants: tuple[tuple[str, str], ...]

    def may(self, store: str, mode: str = "read") -> bool:
        """Whether this identity may ``mode`` (read, write) the store called ``store``."""
        got = dict(self.grants).get(store)
        return got == "write" or (got == "read" and mode == "read")

    @property
    def readable(self) -> list[str]:
        return sorted(s for s, _ in self.grants)

    @property
    def writable(self) -> list[str]:
        return sorted(s for s, m in self.grants if m == "write")


def digest(token: str) -> str:
    """What is kept of a token: its SHA-256."""
    return hashlib.sha256(token.strip().encode()).hexdigest()


def check_name(name: str) -> str:
    """An identity's name, or ConfigError saying what a name may be."""
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"identity name {name!r} is not valid — use lowercase letters, digits, '.', '_'"
            " or '-' (at most 40, starting with a letter or digit)"
        )
    return name


def parse_grant(text: str) -> tuple[str, str]:
    """``STORE:read`` or ``STORE:write`` (``STORE`` alone: read)."""
    store, _, mode = text.rpartition(":") if ":" in text else (text, "", "read")
    mode = mode or "read"
    if mode not in MODES or not store:
        raise ConfigError(f"--store {text!r}: give STORE:read or STORE:write")
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", store):
        raise ConfigError(
            f"--store {text!r}: a store name has letters, digits, '.', '_' or '-' (at most 64)"
        )
    return store, mode


def add(
    conn: psycopg.Connection[Any], name: str, grants: Sequence[tuple[str, str]]
) -> tuple[Identity, str]:
    """Make identity ``name`` with ``grants`` (its stores made if missing); the identity and
    its token, which is never shown again. ConflictError when the name is taken."""
    check_name(name)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with conn.transaction():
        taken = conn.execute(
            "SELECT revoked FROM memdir_identities WHERE name = %s", (name,)
        ).fetchone()
        if taken is not None and taken[0] is None:
            raise ConflictError(
                f"an identity named {name!r} exists — 'memdir tokens revoke {name}' first, or"
                " choose another name"
            )
        if taken is not None:  # revoked: the name is given again, with new grants
            conn.execute("DELETE FROM memdir_identities WHERE name = %s", (name,))
        conn.execute(
            "INSERT INTO memdir_identities (name, hash, created) VALUES (%s, %s, %s)",
            (name, digest(token), memfmt.now()),
        )
        for store, mode in dict(grants).items():
            conn.execute(
                "INSERT INTO memdir_stores (name) VALUES (%s) ON CONFLICT (name) DO NOTHING",
                (store,),
            )
            conn.execute(
                "INSERT INTO memdir_grants (identity, store, mode) VALUES (%s, %s, %s)",
                (name, store, mode),
            )
    return Identity(name, tuple(sorted(dict(grants).items()))), token


def revoke(conn: psycopg.Connection[Any], name: str) -> None:
    """Revoke ``name``'s token for good (its writes stay, recorded as its own); MemdirError
    when there is no such identity."""
    with conn.transaction():
        row = conn.execute(
            "UPDATE memdir_identities SET revoked = %s, hash = 'revoked:' || name"
            " WHERE name = %s RETURNING name",
            (memfmt.now(), name),
        ).fetchone()
    if row is None:
        raise MemdirError(f"no identity named {name!r} — see 'memdir tokens list'")


def listed(conn: psycopg.Connection[Any]) -> list[tuple[str, str, str | None, list[str]]]:
    """Every identity: name, created, revoked (None: active), grants as ``store:mode``."""
    rows = conn.execute(
        "SELECT i.name, i.created, i.revoked, coalesce(array_agg(g.store || ':' || g.mode"
        " ORDER BY g.store) FILTER (WHERE g.store IS NOT NULL), '{}')"
        " FROM memdir_identities i LEFT JOIN memdir_grants g ON g.identity = i.name"
        " GROUP BY i.name, i.created, i.revoked ORDER BY i.name"
    ).fetchall()
    return [(n, c, r, list(g)) for n, c, r, g in rows]


def active(conn: psycopg.Connection[Any]) -> int:
    """How many identities have a token that works."""
    row = conn.execute("SELECT count(*) FROM memdir_identities WHERE revoked IS NULL").fetchone()
    return int(row[0]) if row else 0


def who(conn: psycopg.Connection[Any], token: str) -> Identity | None:
    """The identity whose token this is (None: unknown or revoked)."""
    rows = conn.execute(
        "SELECT i.name, g.store, g.mode FROM memdir_identities i LEFT JOIN memdir_grants g"
        " ON g.identity = i.name WHERE i.hash = %s AND i.revoked IS NULL",
        (digest(token),),
    ).fetchall()
    if not rows:
        return None
    grants = tuple(sorted((s, m) for _, s, m in rows if s is not None))
    return Identity(rows[0][0], grants)


def who_by_name(conn: psycopg.Connection[Any], name: str) -> Identity | None:
    """The identity called ``name`` with its grants (None: no such active identity)."""
    rows = conn.execute(
        "SELECT g.store, g.mode FROM memdir_identities i LEFT JOIN memdir_grants g"
        " ON g.identity = i.name WHERE i.name = %s AND i.revoked IS NULL",
        (name,),
    ).fetchall()
    if not rows:
        return None
    return Identity(name, tuple(sorted((s, m) for s, m in rows if s is not None)))


def session_sql(
    conn: psycopg.Connection[Any], identity: Identity
) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements that make a connection ``identity``'s: the member role, and the ids of
    the stores it may read and write (0: none). Run them on every connection its stores
    use (``PgStore(session=…)``)."""
    rows = conn.execute(
        "SELECT name, id FROM memdir_stores WHERE name = ANY(%s)", (identity.readable,)
    ).fetchall()
    ids = dict(rows)
    read = ",".join(str(ids[s]) for s in identity.readable if s in ids) or "0"
    write = ",".join(str(ids[s]) for s in identity.writable if s in ids) or "0"
    return [
        (f"SET ROLE {MEMBER}", ()),
        ("SELECT set_config('memdir.read', %s, false), set_config('memdir.write', %s, false)",
         (read, write)),
    ]  # fmt: skip


def ensure(conn: psycopg.Connection[Any]) -> None:
    """The identity tables, the member role and the policies (once per database)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (pgschema.lock_key("team"),))
        done = conn.execute(
            "SELECT count(*) FROM pg_policies WHERE tablename = 'memdir_memories'"
            " AND policyname = 'memdir_insert'"
        ).fetchone()
        if done and done[0]:
            return
        conn.execute(TEAM_TABLES)
        try:
            conn.execute(policies_sql())
        except pgschema.driver().Error as exc:
            raise MemdirError(
                f"the database refused the member role or its policies ({pgschema._first(exc)})"
                " — run this once as the tables' owner with CREATEROLE"
            ) from None
