"""The statements a ``PgStore`` change is made of, inside the transaction its caller holds:
taking the store's writer lock and number, checking and carrying out a plan in a few statements
whatever its size, keeping replaced texts as history, keeping the postings and BM25 counts in
step, logging the operation and notifying listeners; and the reads of what they kept (history,
the log).
This module does NOT open connections or transactions (``pg``) and does NOT rank.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memdir import memfile
from memdir import memory as memfmt
from memdir.config import Config
from memdir.entry import Entry
from memdir.errors import ConflictError, MemoryNotFound, PlanError, StoreNotFound
from memdir.find.search import columns_of
from memdir.find.vectors import memory_text
from memdir.history import ChangeRecord, Operation, Version
from memdir.memory import Memory
from memdir.plan import Change, Put, Remove, new_op_id, settle_put
from memdir_postgres import pgschema

if TYPE_CHECKING:
    import psycopg

_list = list
COLUMNS = "name, type, description, created, updated, pinned, warnings, seq"


class Writer:
    """The writes of one database store (``sid``), as statements on a connection."""

    def __init__(self, sid: int, store_name: str, config: Config) -> None:
        self.sid, self.store_name, self.config = sid, store_name, config

    member = False  # an identity's session: row-level security hides what it may not use

    def _gone(self) -> StoreNotFound:
        """The store's row is not there: dropped, or not this identity's to use."""
        if self.member:
            return StoreNotFound(
                f"the store {self.store_name!r} is not there for this identity (not granted"
                " for this, or dropped) — nothing was read or changed"
            )
        return StoreNotFound(f"the store {self.store_name!r} was dropped from the database")

    @property
    def _key(self) -> int:
        return pgschema.lock_key("store", self.sid)

    def next_seq(self, conn: psycopg.Connection[Any]) -> int:
        """Take the store's writer lock and row for this transaction; the operation's number."""
        row = conn.execute(
            "WITH held AS (SELECT pg_advisory_xact_lock(%s)) UPDATE memdir_stores SET seq ="
            " seq + 1 FROM held WHERE id = %s RETURNING seq",
            (self._key, self.sid),
        ).fetchone()
        if row is None:
            raise self._gone()
        return int(row[0])

    def write(
        self,
        conn: psycopg.Connection[Any],
        plan: Sequence[Change],
        op_id: str,
        stamp: str,
        seq: int,
    ) -> _list[ChangeRecord]:
        """Carry out a plan inside the open transaction: a few statements whatever its size."""
        names = [
            memfmt.validate_name(c.memory.name if isinstance(c, Put) else c.name) for c in plan
        ]
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise PlanError(f"the plan changes {twice!r} twice — combine those changes")
        current = {
            r[0]: r[1:]
            for r in conn.execute(
                "SELECT name, text, digest, terms, length FROM memdir_memories"
                " WHERE store = %s AND name = ANY(%s) FOR UPDATE",
                (self.sid, names),
            ).fetchall()
        }
        changes: _list[tuple[str, Change, str | None]] = []  # name, change, new text
        for name, change in zip(names, plan, strict=True):
            have = current.get(name)
            now = memory_of(name, have[0], have[1]) if have else None
            if change.expect is not None and (now is None or now.digest != change.expect):
                raise ConflictError(
                    f"memory {name!r} changed since it was read — reload it and retry"
                )
            if isinstance(change, Remove):
                if have is None:
                    raise MemoryNotFound(f"no memory named {name!r} — see 'memdir list'")
                changes.append((name, change, None))
                continue
            new = settle_put(change, name, now, self.config, stamp)
            if new is not None:
                changes.append((name, change, memfmt.dumps(new)))
        if not changes:
            return []
        created = [n for n, _, text in changes if n not in current]
        self.check_new_names(conn, created, set(names))
        replaced = [n for n, _, _ in changes if n in current]
        old = [
            (n, current[n][0], "delete" if t is None else "update", c.reason)
            for n, c, t in changes
            if n in current
        ]
        kept = self.keep(conn, old, op_id, stamp)
        self.unindex(conn, [(n, current[n][2], current[n][3]) for n in replaced])
        gone = [n for n, _, text in changes if text is None]
        if gone:  # their vectors go too (an update's is replaced when next embedded)
            conn.execute(
                "DELETE FROM memdir_vectors WHERE store = %s AND name = ANY(%s)", (self.sid, gone)
            )
        rows = [Row.of(n, t, seq, self.config.types) for n, _, t in changes if t is not None]
        self.index(conn, rows)
        digests = {r.name: r.digest for r in rows}
        return [
            ChangeRecord(
                name=name,
                file=memfmt.filename_for(name),
                action="delete" if text is None else "update" if name in current else "create",
                before=kept.get(name),
                reason=change.reason,
                digest=digests.get(name),
            )
            for name, change, text in changes
        ]

    def check_new_names(
        self, conn: psycopg.Connection[Any], names: _list[str], planned: set[str]
    ) -> None:
        """A new memory's name must not pass for an existing one's (case, look-alikes)."""
        if not names:
            return
        wanted = {memfmt.skeleton(n): n for n in names}
        for skel, twin in conn.execute(
            "SELECT skeleton, name FROM memdir_memories WHERE store = %s AND skeleton = ANY(%s)",
            (self.sid, list(wanted)),
        ):
            name = wanted[skel]
            if twin != name and twin not in planned:
                raise ConflictError(
                    f"memory name {name!r} differs from the existing {twin!r} only in case or"
                    f" look-alike characters — update {twin!r} or choose a distinct name"
                )

    def keep(
        self,
        conn: psycopg.Connection[Any],
        texts: _list[tuple[str, str, str, str]],
        op_id: str,
        stamp: str,
    ) -> dict[str, int]:
        """Keep each ``(name, text, action, reason)`` as the next history version of that
        name; the version numbers."""
        if not texts:
            return {}
        last = dict(
            conn.execute(
                "SELECT name, max(version) FROM memdir_history WHERE store = %s"
                " AND name = ANY(%s) GROUP BY name",
                (self.sid, [t[0] for t in texts]),
            ).fetchall()
        )
        numbers = {name: int(last.get(name) or 0) + 1 for name, _, _, _ in texts}
        conn.cursor().executemany(
            "INSERT INTO memdir_history (store, name, version, time, action, reason, op, text)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (self.sid, name, numbers[name], stamp, action, reason, op_id, text)
                for name, text, action, reason in texts
            ],
        )
        return numbers

    def unindex(
        self, conn: psycopg.Connection[Any], old: _list[tuple[str, _list[str], int]]
    ) -> None:
        """Remove memories ``(name, terms, length)`` with their postings and counts."""
        if not old:
            return
        conn.execute(
            "DELETE FROM memdir_memories WHERE store = %s AND name = ANY(%s)",
            (self.sid, [n for n, _, _ in old]),
        )
        pairs = [(t, n) for n, terms, _ in old for t in terms]
        conn.execute(
            "DELETE FROM memdir_postings p USING unnest(%s::text[], %s::text[]) AS u(t, n)"
            " WHERE p.store = %s AND p.term = u.t AND p.name = u.n",
            ([t for t, _ in pairs], [n for _, n in pairs], self.sid),
        )
        df: dict[str, int] = {}
        for t, _ in pairs:
            df[t] = df.get(t, 0) - 1
        self.count(conn, df, -len(old), -sum(length for _, _, length in old))

    def index(self, conn: psycopg.Connection[Any], rows: _list[Row]) -> None:
        """Insert memories with their postings and counts."""
        if not rows:
            return
        conn.cursor().executemany(
            "INSERT INTO memdir_memories (store, name, skeleton, text, digest, type,"
            " description, created, updated, pinned, warnings, seq, terms, tok_name,"
            " tok_description, tok_body, length, embed_digest) VALUES"
            " (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [(self.sid, *r.values) for r in rows],
        )
        pairs = [(t, r.name) for r in rows for t in r.terms]
        conn.execute(
            "INSERT INTO memdir_postings (store, term, name)"
            " SELECT %s, t, n FROM unnest(%s::text[], %s::text[]) AS u(t, n)",
            (self.sid, [t for t, _ in pairs], [n for _, n in pairs]),
        )
        df: dict[str, int] = {}
        for t, _ in pairs:
            df[t] = df.get(t, 0) + 1
        self.count(conn, df, len(rows), sum(r.length for r in rows))

    def count(
        self, conn: psycopg.Connection[Any], df: dict[str, int], docs: int, tokens: int
    ) -> None:
        """Apply changes to the document frequencies and the store's counts (terms in one
        order: two writers never wait on each other's rows in a cycle)."""
        moved = sorted((t, d) for t, d in df.items() if d)
        if moved:
            conn.execute(
                "INSERT INTO memdir_terms (store, term, df) SELECT %s, t, d"
                " FROM unnest(%s::text[], %s::bigint[]) AS u(t, d)"
                " ON CONFLICT (store, term) DO UPDATE SET df = memdir_terms.df + EXCLUDED.df",
                (self.sid, [t for t, _ in moved], [d for _, d in moved]),
            )
        conn.execute(
            "UPDATE memdir_stores SET docs = docs + %s, tokens = tokens + %s WHERE id = %s",
            (docs, tokens, self.sid),
        )

    def log(self, conn: psycopg.Connection[Any], op: Operation, seq: int) -> None:
        conn.execute(
            "INSERT INTO memdir_log (store, seq, id, time, source, summary, changes, undoes)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            (
                self.sid,
                seq,
                op.id,
                op.time,
                op.source,
                op.summary,
                json.dumps(list(op.changes), ensure_ascii=False),
                op.undoes,
            ),
        )
        conn.execute("SELECT pg_notify(%s, %s)", (pgschema.CHANNEL, f"{self.sid} {seq}"))

    def take(
        self,
        conn: psycopg.Connection[Any],
        loaded: Sequence[tuple[str, Memory | None, str | None, Sequence[tuple[Version, str]]]],
        source: str,
    ) -> Operation:
        """Bring in memories as another store holds them (``checked_items``), history
        included, as one logged operation; ConflictError when a name is taken."""
        planned = [name for name, _, _, _ in loaded]
        seq = self.next_seq(conn)
        taken = conn.execute(
            "SELECT name FROM memdir_memories WHERE store = %s AND name = ANY(%s) UNION"
            " SELECT name FROM memdir_history WHERE store = %s AND name = ANY(%s) LIMIT 1",
            (self.sid, planned, self.sid, planned),
        ).fetchone()
        if taken:
            raise ConflictError(
                f"the store already has a memory (or history) named {taken[0]!r} — import"
                " into an empty store"
            )
        self.check_new_names(conn, [n for n, m, _, _ in loaded if m is not None], set(planned))
        conn.cursor().executemany(
            "INSERT INTO memdir_history (store, name, version, time, action, reason,"
            " op, text) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (self.sid, name, v.version, v.time, v.action, v.reason, v.op, t)
                for name, _, _, versions in loaded
                for v, t in versions
            ],
        )
        rows = [
            Row.of(name, text, seq, self.config.types)
            for name, _, text, _ in loaded
            if text is not None
        ]
        self.index(conn, rows)
        records = [
            ChangeRecord(
                name=r.name,
                file=memfmt.filename_for(r.name),
                action="create",
                before=None,
                reason="imported",
                digest=r.digest,
            )
            for r in rows
        ]
        op = Operation(new_op_id(), memfmt.now(), source, "import", tuple(records), None)
        self.log(conn, op, seq)
        return op

    # -- what the catalogue follows --------------------------------------------------------

    def seq(self, conn: psycopg.Connection[Any]) -> int:
        """The store's operation counter; StoreNotFound when the store was dropped."""
        row = conn.execute("SELECT seq FROM memdir_stores WHERE id = %s", (self.sid,)).fetchone()
        if row is None:
            raise self._gone()
        return int(row[0])

    def catalogue(self, conn: psycopg.Connection[Any]) -> tuple[int, _list[tuple[Any, ...]]]:
        """The counter and every memory's catalogue row (``entry_of``)."""
        seq = self.seq(conn)
        rows = conn.execute(
            f"SELECT {COLUMNS} FROM memdir_memories WHERE store = %s", (self.sid,)
        ).fetchall()
        return seq, rows

    def since(
        self, conn: psycopg.Connection[Any], seen: int
    ) -> tuple[set[str], _list[tuple[Any, ...]], int] | None:
        """What changed after operation ``seen``: the names the log gives, their rows now,
        the counter (None: nothing did)."""
        seq = self.seq(conn)
        if seq == seen:
            return None
        changed: set[str] = set()
        for (changes,) in conn.execute(
            "SELECT changes FROM memdir_log WHERE store = %s AND seq > %s", (self.sid, seen)
        ):
            changed.update(c["name"] for c in changes)
        rows = conn.execute(
            f"SELECT {COLUMNS} FROM memdir_memories WHERE store = %s AND name = ANY(%s)",
            (self.sid, list(changed)),
        ).fetchall()
        return changed, rows, seq

    # -- what the writes kept ----------------------------------------------------------------

    def versions(self, conn: psycopg.Connection[Any], name: str) -> _list[Version]:
        """The kept versions of ``name``, oldest first."""
        rows = conn.execute(
            "SELECT name, version, time, action, reason, op FROM memdir_history"
            " WHERE store = %s AND name = %s ORDER BY version",
            (self.sid, name),
        ).fetchall()
        return [Version(*r) for r in rows]

    def version_text(self, conn: psycopg.Connection[Any], name: str, version: int) -> str:
        """The text of one kept version; MemoryNotFound."""
        row = conn.execute(
            "SELECT text FROM memdir_history WHERE store = %s AND name = %s AND version = %s",
            (self.sid, name, version),
        ).fetchone()
        if row is None:
            raise MemoryNotFound(
                f"memory {name!r} has no version {version} — see 'memdir history {name}'"
            )
        return str(row[0])

    def operations(self, conn: psycopg.Connection[Any], limit: int | None) -> _list[Operation]:
        """The logged operations, oldest first (the last ``limit`` of them)."""
        rows = conn.execute(
            "SELECT id, time, source, summary, changes, undoes FROM memdir_log"
            " WHERE store = %s ORDER BY seq DESC LIMIT %s",
            (self.sid, limit),
        ).fetchall()
        return [Operation(i, t, s, summ, tuple(ch), u) for i, t, s, summ, ch, u in reversed(rows)]


@dataclass(frozen=True)
class Row:
    """A memory as its row holds it: the values inserted, its terms and length."""

    name: str
    digest: str
    terms: _list[str]
    length: int
    values: tuple[Any, ...]

    @classmethod
    def of(cls, name: str, text: str, seq: int, types: tuple[str, ...]) -> Row:
        mem = memfmt.loads(text)
        digest = memfmt.digest_of(text.encode())
        cols = columns_of(mem.name, mem.description, mem.body)
        terms = sorted(set(cols[0]) | set(cols[1]) | set(cols[2]))
        length = sum(map(len, cols))
        entry = memfile.entry_from(mem, memfmt.filename_for(name), types)
        embed = hashlib.blake2b(
            memory_text(mem.name, mem.description, mem.body).encode("utf-8", "surrogatepass"),
            digest_size=16,
        ).digest()
        values = (
            name,
            memfmt.skeleton(name),
            text,
            digest,
            entry.type,
            entry.description,
            entry.created,
            entry.updated,
            entry.pinned,
            list(entry.warnings),
            seq,
            terms,
            " ".join(cols[0]),
            " ".join(cols[1]),
            " ".join(cols[2]),
            length,
            embed,
        )
        return cls(name, digest, terms, length, values)


def entry_of(row: tuple[Any, ...]) -> Entry:
    name, type_, description, created, updated, pinned, warnings, _ = row
    return Entry(
        name=name,
        type=type_,
        description=description,
        created=created,
        updated=updated,
        pinned=pinned,
        file=memfmt.filename_for(name),
        warnings=tuple(warnings),
    )


def memory_of(name: str, text: str, digest: str) -> Memory:
    return memfmt.loads(text).replace(path=memfmt.filename_for(name), digest=digest)
