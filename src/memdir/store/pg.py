"""``PgStore``: a store (``base.Store``) whose memories live in PostgreSQL, for many agents on many
hosts sharing one memory.

Same contract as the folder: every change goes through ``apply(plan)``, one database
transaction that takes the store's row lock (writers on every host queue there, nothing is
lost, a killed writer leaves nothing half-applied), keeps every replaced or retired text in
``memdir_history``, logs the operation and notifies listeners. Plans are checked by the same
code as for files (``plan.screen``, ``transaction.settle_put``/``check_memory``). Readers keep
the catalogue in memory and catch up from the log: a long-running process (``watch=True``)
hears of other hosts' writes through LISTEN/NOTIFY; others ask the store's change counter.
What belongs to one host (conversation cursors, the review queue, the recall log) lives in a
local state folder, ``root``.
This module does NOT rank (``pgsearch``) and does NOT create the tables (``pgschema``).
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import index as idx
from .. import memory as memfmt
from ..config import Config
from ..entry import Entry
from ..errors import (
    ConflictError,
    MemdirError,
    MemoryNotFound,
    PlanError,
    StoreNotFound,
)
from ..history import ChangeRecord, Operation, Version
from ..layout import INTERNAL
from ..memory import Memory
from ..plan import Change, Put, Remove, screen
from ..provenance import HAND, Origin, label_of
from ..search import columns_of
from ..transaction import check_memory, new_op_id, settle_put
from ..vectors import memory_text
from ..watch import WATCH_AFTER
from . import pgschema
from .base import Store, StoreBase, Taken, checked_items

if TYPE_CHECKING:
    import psycopg

    from ..embed import Embedder
    from .pgsearch import PgSearch

_list = list
_COLUMNS = "name, type, description, created, updated, pinned, warnings, seq"


class _Unchanged(Exception):
    """Raised inside a transaction to roll it back: the plan changed nothing."""


def state_dir(config: Config) -> Path:
    """This host's folder for a database store's local state (cursors, review, recall log)."""
    import platformdirs

    assert config.database_url is not None
    key = hashlib.sha256(f"{pgschema.shown(config.database_url)}\0{config.store}".encode())
    return (
        Path(platformdirs.user_state_dir("memdir", appauthor=False)) / "db" / key.hexdigest()[:16]
    )


IDLE_CHECK = 30.0  # seconds unused after which a connection is looked at before it is used


class PgStore(StoreBase):
    """The memories of one named store in a PostgreSQL database.

    ``config.database_url`` and ``config.store`` say which; ``create``: make the store if the
    database has none of that name (else StoreNotFound); ``watch``: listen for other hosts'
    changes (True) instead of asking the change counter at each read. ``root``: the local state
    folder (default: ``state_dir``)."""

    def __init__(
        self,
        config: Config,
        *,
        create: bool = True,
        watch: bool | None = None,
        embedder: Embedder | None = None,
        root: Path | None = None,
    ) -> None:
        if not config.database_url:
            raise MemdirError("no database_url is set — pass --db URL or set MEMDIR_DATABASE_URL")
        self.config = config
        self.url = config.database_url
        self.store_name = config.store
        self.read_only = False
        self.root = root or state_dir(config)
        self.internal = self.root / INTERNAL
        self._mu = threading.RLock()
        self._conn = pgschema.connect(self.url, autocommit=True)
        self._used = time.monotonic()
        self.idle_check = IDLE_CHECK  # seconds unused after which the connection is looked at
        pgschema.ensure_schema(self._conn)
        sid = pgschema.store_id(self._conn, self.store_name, create=create)
        if sid is None:
            self._conn.close()
            raise StoreNotFound(
                f"no store named {self.store_name!r} in {pgschema.shown(self.url)} — run"
                " 'memdir init' with the same --db and --store"
            )
        self.sid = sid
        self.internal.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._entries: dict[str, Entry] = {}
        self._names: list[str] | None = None
        self._seq = -1
        self._dirty = threading.Event()
        self._listener: threading.Thread | None = None
        self._listening = False
        self._closed = threading.Event()
        self._search: PgSearch | None = None
        self._embedder = embedder
        self._pace: tuple[Callable[[int, int], None] | None, float | None] = (None, None)
        self._reload()
        self._watch, self._opened = watch, time.monotonic()
        if watch:
            self._listen()

    def __repr__(self) -> str:
        return f"PgStore({pgschema.shown(self.url)!r}, store={self.store_name!r})"

    # -- connection and catching up ----------------------------------------------------------

    @contextlib.contextmanager
    def _txn(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction on this store's connection (one thread at a time); the driver's
        failures as one line (``pgschema.explained``)."""
        with self._mu, pgschema.explained(self.url):
            self._alive()
            with self._conn.transaction():
                yield self._conn
            self._used = time.monotonic()

    @contextlib.contextmanager
    def _read(self) -> Iterator[psycopg.Connection[Any]]:
        """This store's connection for reads, each statement on its own (one round trip)."""
        with self._mu, pgschema.explained(self.url):
            self._alive()
            yield self._conn
            self._used = time.monotonic()

    def _alive(self) -> None:
        """A connection that works: a new one for a closed or broken one, and one look at an
        old one left unused a while (a server restarted meanwhile answers its first use with
        a broken connection: a long-lived server reconnects instead of failing a call)."""
        conn = self._conn
        idle = time.monotonic() - self._used
        if not conn.closed and not conn.broken and idle > self.idle_check:
            try:
                conn.execute("SELECT 1")
            except pgschema.driver().Error:
                pass  # conn.broken says so now
        if conn.closed or conn.broken:
            with contextlib.suppress(Exception):
                conn.close()
            self._conn = pgschema.connect(self.url, autocommit=True)

    def _reload(self) -> None:
        with self._read() as conn:
            seq = self._store_seq(conn)
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM memdir_memories WHERE store = %s", (self.sid,)
            ).fetchall()
        self._entries = {r[0]: _entry(r) for r in rows}
        self._names, self._seq = None, seq

    def _store_seq(self, conn: psycopg.Connection[Any]) -> int:
        row = conn.execute("SELECT seq FROM memdir_stores WHERE id = %s", (self.sid,)).fetchone()
        if row is None:
            raise StoreNotFound(f"the store {self.store_name!r} was dropped from the database")
        return int(row[0])

    def _catch_up(self) -> None:
        """Bring the catalogue up to date with every host's writes: nothing to do when the
        listener heard of none; else the memories the log names since the last look."""
        if self._listening and not self._dirty.is_set():
            return
        if self._watch is None and time.monotonic() - self._opened > WATCH_AFTER:
            self._watch = False  # tried once
            with contextlib.suppress(MemdirError):  # else: ask the counter, as before
                self._listen()  # still reading a while after opening: a long-running process
        self._dirty.clear()
        with self._read() as conn:
            seq = self._store_seq(conn)
            if seq == self._seq:
                return
            changed: set[str] = set()
            for (changes,) in conn.execute(
                "SELECT changes FROM memdir_log WHERE store = %s AND seq > %s",
                (self.sid, self._seq),
            ):
                changed.update(c["name"] for c in changes)
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM memdir_memories WHERE store = %s AND name = ANY(%s)",
                (self.sid, list(changed)),
            ).fetchall()
        self._note(changed, rows, seq)

    def _note(self, changed: set[str], rows: list[tuple[Any, ...]], seq: int) -> None:
        for name in changed:
            self._entries.pop(name, None)
        for r in rows:
            self._entries[r[0]] = _entry(r)
        self._names, self._seq = None, max(seq, self._seq)

    def _listen(self) -> None:
        """Hear other hosts' writes (LISTEN/NOTIFY on a connection of its own)."""
        conn = pgschema.connect(self.url, autocommit=True)
        conn.execute(f"LISTEN {pgschema.CHANNEL}")
        self._listening = True
        self._dirty.set()  # anything between the load and the LISTEN

        def run() -> None:
            mine = f"{self.sid} "
            try:
                while not self._closed.is_set():
                    for note in conn.notifies(timeout=1.0):
                        if note.payload.startswith(mine):
                            self._dirty.set()
            except Exception:  # the connection died: ask the counter at each read instead
                self._listening = False
                self._dirty.set()
            finally:
                conn.close()

        self._listener = threading.Thread(target=run, name="memdir-listen", daemon=True)
        self._listener.start()

    # -- the Store surface --------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's writer lock (every host's writers wait; re-entrant)."""
        with self._mu:
            self._conn.execute("SELECT pg_advisory_lock(%s)", (self._key,))
            try:
                yield
            finally:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (self._key,))

    @property
    def _key(self) -> int:
        return pgschema.lock_key("store", self.sid)

    def refresh(self) -> None:
        """Catch up now (a database has no hand edits to look for: the log says it all)."""
        self._dirty.set()
        self._catch_up()

    def rebuild(self) -> dict[str, Entry]:
        self._reload()
        return dict(self._entries)

    def reopen(self) -> Store:
        return PgStore(self.config, create=False, root=self.root, embedder=self._embedder)

    def close(self) -> None:
        self._closed.set()
        if self._listener is not None:
            self._listener.join(timeout=3)
        if self._search is not None:
            self._search.close()
        with self._mu:
            self._conn.close()

    @property
    def index_path(self) -> Path:
        """MEMORY.md as rendered now, in the local state folder."""
        path = self.root / idx.INDEX_FILE
        from ..atomic import write_atomic

        write_atomic(path, self.render_index().encode())
        return path

    def render_index(self) -> str:
        return idx.render(self.entries(), self.config.types)

    @property
    def location(self) -> str:
        return f"{pgschema.shown(self.url)} (store {self.store_name!r})"

    def where_kept(self) -> str:
        return f"in PostgreSQL, {self.location}"

    def place_of(self, name: str) -> Path | str:
        return self.location  # no file: the store it is in

    @property
    def watching(self) -> bool:
        return self._listening

    def entries(self, type: str | None = None) -> _list[Entry]:
        self._catch_up()
        if self._names is None:
            self._names = sorted(self._entries)
        every = [self._entries[n] for n in self._names]
        return every if type is None else [e for e in every if e.type == type]

    def problems(self) -> _list[idx.Problem]:
        return []  # the database holds only memories that passed the checks

    def get(self, name: str) -> Memory:
        norm = memfmt.validate_name(name)
        with self._read() as conn:
            row = conn.execute(
                "SELECT text, digest FROM memdir_memories WHERE store = %s AND name = %s",
                (self.sid, norm),
            ).fetchone()
        if row is not None:
            return _memory(norm, row[0], row[1])
        raise self._missing(norm)

    def _missing(self, name: str) -> MemoryNotFound:
        """The error for a name with no memory, saying which name was perhaps meant."""
        self._catch_up()
        close = difflib.get_close_matches(name, list(self._entries), n=1, cutoff=0.75)
        hint = f"did you mean {close[0]!r}?" if close else "see 'memdir list' for the names"
        return MemoryNotFound(f"no memory named {name!r} — {hint}")

    def __contains__(self, name: object) -> bool:
        self._catch_up()
        return isinstance(name, str) and name in self._entries

    def list(self, type: str | None = None) -> _list[Memory]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT name, text, digest FROM memdir_memories WHERE store = %s"
                " AND (%s::text IS NULL OR type = %s) ORDER BY name",
                (self.sid, type, type),
            ).fetchall()
        return [_memory(n, t, d) for n, t, d in rows]

    def __len__(self) -> int:
        self._catch_up()
        return len(self._entries)

    @property
    def version(self) -> int:
        self._catch_up()
        return self._seq

    # -- search --------------------------------------------------------------------------------

    def _ranker(self) -> PgSearch:
        if self._search is None:
            from .pgsearch import PgSearch

            self._search = PgSearch(self, self._embedder)
            self._search.progress, self._search.budget = self._pace
        return self._search

    def pace_embedding(
        self, progress: Callable[[int, int], None] | None = None, budget: float | None = None
    ) -> None:
        self._pace = (progress, budget)
        if self._search is not None:
            self._search.progress, self._search.budget = self._pace

    def embed_all(self, progress: Callable[[int, int], None] | None = None) -> int:
        return self._ranker().embed_all(progress)

    def discard_caches(self) -> None:
        self._ranker().discard()

    @property
    def embedding_backlog(self) -> int:
        return 0 if self._search is None else self._search.backlog

    def ranking_note(self) -> str:
        return self._ranker().describe()

    def ranker(self) -> PgSearch:
        """BM25 over the postings and the vectors, the catalogue caught up."""
        self._catch_up()
        return self._ranker()

    def entry_at(self, key: str) -> Entry | None:
        """The current memory called ``key`` (a database ranks names), if any."""
        return self._entries.get(key)

    # -- writing -------------------------------------------------------------------------------

    def apply(
        self,
        plan: Sequence[Change],
        *,
        source: str = "api",
        summary: str = "",
        secrets: str = "refuse",
        undoes: str | None = None,
    ) -> Operation | None:
        """Apply a list of changes as one database transaction; None when nothing changed."""
        for change in plan:
            if isinstance(change, Put):
                check_memory(change.memory, self.config)
        plan = screen(plan, secrets)
        op_id, stamp = new_op_id(), memfmt.now()
        try:
            with self._txn() as conn, conn.pipeline():  # statements sent together
                seq = self._next_seq(conn)
                records = self._write(conn, plan, op_id, stamp, seq)
                if not records:
                    raise _Unchanged
                op = Operation(op_id, stamp, source, summary, tuple(records), undoes)
                self._log(conn, op, seq)
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM memdir_memories WHERE store = %s AND name = ANY(%s)",
                    (self.sid, [r["name"] for r in records]),
                ).fetchall()
        except _Unchanged:
            return None
        if self._seq == seq - 1:  # nobody else wrote in between: no need to ask
            self._note({r["name"] for r in records}, rows, seq)
        return op

    def _next_seq(self, conn: psycopg.Connection[Any]) -> int:
        """Take the store's writer lock and row for this transaction; the operation's number."""
        row = conn.execute(
            "WITH held AS (SELECT pg_advisory_xact_lock(%s)) UPDATE memdir_stores SET seq ="
            " seq + 1 FROM held WHERE id = %s RETURNING seq",
            (self._key, self.sid),
        ).fetchone()
        if row is None:
            raise StoreNotFound(f"the store {self.store_name!r} was dropped from the database")
        return int(row[0])

    def _write(
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
            now = _memory(name, have[0], have[1]) if have else None
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
        self._check_new_names(conn, created, set(names))
        replaced = [n for n, _, _ in changes if n in current]
        old = [
            (n, current[n][0], "delete" if t is None else "update", c.reason)
            for n, c, t in changes
            if n in current
        ]
        kept = self._keep(conn, old, op_id, stamp)
        self._unindex(conn, [(n, current[n][2], current[n][3]) for n in replaced])
        gone = [n for n, _, text in changes if text is None]
        if gone:  # their vectors go too (an update's is replaced when next embedded)
            conn.execute(
                "DELETE FROM memdir_vectors WHERE store = %s AND name = ANY(%s)", (self.sid, gone)
            )
        rows = [_Row.of(n, t, seq, self.config.types) for n, _, t in changes if t is not None]
        self._index(conn, rows)
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

    def _check_new_names(
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

    def _keep(
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

    def _unindex(
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
        self._count(conn, df, -len(old), -sum(length for _, _, length in old))

    def _index(self, conn: psycopg.Connection[Any], rows: _list[_Row]) -> None:
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
        self._count(conn, df, len(rows), sum(r.length for r in rows))

    def _count(
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

    def origin(self, name: str) -> Origin:
        """Where the current text of ``name`` came from: the source of the last logged
        operation that wrote the digest it has now."""
        mem = self.get(name)
        probe = json.dumps([{"name": mem.name, "digest": mem.digest}])
        with self._read() as conn:
            row = conn.execute(
                "SELECT source, time, id, changes FROM memdir_log WHERE store = %s"
                " AND changes @> %s::jsonb ORDER BY seq DESC LIMIT 1",
                (self.sid, probe),
            ).fetchone()
        if row is None:
            return Origin(HAND)
        by = next((c.get("by") for c in row[3] if c.get("name") == mem.name), None)
        return Origin(label_of(row[0], by), row[1], row[2])

    def _log(self, conn: psycopg.Connection[Any], op: Operation, seq: int) -> None:
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

    def record(self, summary: str, *, source: str, undoes: str | None = None) -> Operation:
        op = Operation(new_op_id(), memfmt.now(), source, summary, (), undoes)
        with self._txn() as conn:
            self._log(conn, op, self._next_seq(conn))
        return op

    def check(self, memory: Memory) -> Memory:
        return check_memory(memory, self.config)

    def purge(self, name: str, version: int | None = None, *, source: str = "api") -> int:
        memfmt.validate_name(name)
        if version is None and name in self:
            self.delete(name, reason="purged", source=source)
        with self._txn() as conn:
            gone = conn.execute(
                "DELETE FROM memdir_history WHERE store = %s AND name = %s"
                " AND (%s::int IS NULL OR version = %s)",
                (self.sid, name, version, version),
            ).rowcount
        if not gone:
            what = f"version {version} of {name!r}" if version else f"{name!r}"
            raise MemoryNotFound(f"no {what} to purge — see 'memdir history {name}'")
        self.record(f"purged {name}" + (f"@v{version}" if version else ""), source=source)
        return int(gone)

    # -- history and log --------------------------------------------------------------------

    def history(self, name: str) -> _list[Version]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT name, version, time, action, reason, op FROM memdir_history"
                " WHERE store = %s AND name = %s ORDER BY version",
                (self.sid, memfmt.validate_name(name)),
            ).fetchall()
        return [Version(*r) for r in rows]

    def version_text(self, name: str, version: int) -> str:
        with self._read() as conn:
            row = conn.execute(
                "SELECT text FROM memdir_history WHERE store = %s AND name = %s AND version = %s",
                (self.sid, memfmt.validate_name(name), version),
            ).fetchone()
        if row is None:
            raise MemoryNotFound(
                f"memory {name!r} has no version {version} — see 'memdir history {name}'"
            )
        return str(row[0])

    def log(self, limit: int | None = None) -> _list[Operation]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT id, time, source, summary, changes, undoes FROM memdir_log"
                " WHERE store = %s ORDER BY seq DESC LIMIT %s",
                (self.sid, limit),
            ).fetchall()
        return [Operation(i, t, s, summ, tuple(ch), u) for i, t, s, summ, ch, u in reversed(rows)]

    def rename(self, old: str, new: str, *, source: str = "api") -> Memory:
        old, new = memfmt.validate_name(old), memfmt.validate_name(new)
        with self.locked():
            current = self.get(old)
            if new in self:
                raise ConflictError(
                    f"a memory named {new!r} exists — choose another name or remove it first"
                )
            with self._txn() as conn:
                if not self.history(new):  # the past follows the name
                    conn.execute(
                        "UPDATE memdir_history SET name = %s WHERE store = %s AND name = %s",
                        (new, self.sid, old),
                    )
            self.apply(
                [
                    Put(current.replace(name=new), reason=f"renamed from {old}", merge_extra=False),
                    Remove(old, reason=f"renamed to {new}", expect=current.digest),
                ],
                source=source,
                summary=f"rename {old} to {new}",
                secrets="allow",
            )
        return self.get(new)

    # -- files in and out -------------------------------------------------------------------

    def take(self, items: Sequence[Taken], *, source: str) -> Operation | None:
        """As ``MemoryStore.take``, in one transaction."""
        loaded = checked_items(items, self.config)
        planned = [name for name, _, _, _ in loaded]
        with self._txn() as conn:
            seq = self._next_seq(conn)
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
            self._check_new_names(conn, [n for n, m, _, _ in loaded if m is not None], set(planned))
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
                _Row.of(name, text, seq, self.config.types)
                for name, _, text, _ in loaded
                if text is not None
            ]
            self._index(conn, rows)
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
            self._log(conn, op, seq)
        if len(loaded) >= 1000:  # a bulk load: fresh statistics for the planner
            with self._read() as conn:
                conn.execute("ANALYZE memdir_memories, memdir_postings, memdir_terms")
        self._reload()
        return op

    def text(self, name: str) -> str:
        norm = memfmt.validate_name(name)
        with self._read() as conn:
            row = conn.execute(
                "SELECT text FROM memdir_memories WHERE store = %s AND name = %s",
                (self.sid, norm),
            ).fetchone()
        if row is None:
            raise self._missing(norm)
        return str(row[0])

    def retired(self) -> _list[str]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT h.name FROM memdir_history h WHERE h.store = %s AND NOT EXISTS"
                " (SELECT 1 FROM memdir_memories m WHERE m.store = h.store AND m.name = h.name)"
                " ORDER BY 1",
                (self.sid,),
            ).fetchall()
        return [r[0] for r in rows]


@dataclass(frozen=True)
class _Row:
    """A memory as its row holds it: the values inserted, its terms and length."""

    name: str
    digest: str
    terms: _list[str]
    length: int
    values: tuple[Any, ...]

    @classmethod
    def of(cls, name: str, text: str, seq: int, types: tuple[str, ...]) -> _Row:
        mem = memfmt.loads(text)
        digest = memfmt.digest_of(text.encode())
        cols = columns_of(mem.name, mem.description, mem.body)
        terms = sorted(set(cols[0]) | set(cols[1]) | set(cols[2]))
        length = sum(map(len, cols))
        entry = idx.entry_from(mem, memfmt.filename_for(name), types)
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


def _entry(row: tuple[Any, ...]) -> Entry:
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


def _memory(name: str, text: str, digest: str) -> Memory:
    return memfmt.loads(text).replace(path=memfmt.filename_for(name), digest=digest)
