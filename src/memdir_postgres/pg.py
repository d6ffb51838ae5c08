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
import json
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdir import memory as memfmt
from memdir.config import Config
from memdir.disk.layout import state_dir
from memdir.disk.watch import WATCH_AFTER
from memdir.entry import INDEX_FILE, Entry, Problem, render
from memdir.errors import MemdirError, MemoryNotFound, ReadOnlyStore, StoreNotFound
from memdir.gate.provenance import HAND, Origin, label_of
from memdir.history import Operation, Version
from memdir.memory import Memory
from memdir.plan import Change, Put, check_memory, new_op_id, screen
from memdir.store.base import Store, StoreBase, Taken, checked_items
from memdir_postgres import pgschema
from memdir_postgres.pgwrite import COLUMNS, Writer, entry_of, memory_of

if TYPE_CHECKING:
    import psycopg

    from memdir.find.embed import Embedder
    from memdir_postgres.pgsearch import PgSearch

_list = list

log = logging.getLogger("memdir")


class _Unchanged(Exception):
    """Raised inside a transaction to roll it back: the plan changed nothing."""


# seconds unused after which a connection is looked at (one round trip) before it is used: a
# server restarts in more than that, so a long-lived store's first call after a restart goes
# out on a new connection instead of failing
IDLE_CHECK = 1.0


class PgStore(StoreBase):
    """The memories of one named store in a PostgreSQL database.

    ``config.database_url`` and ``config.store`` say which; ``create``: make the store if the
    database has none of that name (else StoreNotFound); ``watch``: listen for other hosts'
    changes (True) instead of asking the change counter at each read. ``root``: the local state
    folder (default: ``pgschema.state_dir``). ``session``: statements run on each connection
    before anything else (``pgteam.session_sql``: an identity's member role and stores, which
    row-level security holds every statement to); ``read_only``: refuse every change
    (ReadOnlyStore), as for an identity that may only read this store."""

    def __init__(
        self,
        config: Config,
        *,
        create: bool = True,
        watch: bool | None = None,
        embedder: Embedder | None = None,
        root: Path | None = None,
        session: Sequence[tuple[str, tuple[Any, ...]]] = (),
        read_only: bool = False,
    ) -> None:
        if not config.database_url:
            raise MemdirError("no database_url is set — pass --db URL or set MEMDIR_DATABASE_URL")
        self.config = config
        self.url = config.database_url
        self.store_name = config.store
        self.read_only = read_only
        self.session = tuple(session)
        self.member = bool(session)  # restricted by row-level security: owns nothing
        self.root = root or pgschema.state_dir(config)
        self.internal = state_dir(self.root)
        self._mu = threading.RLock()
        self._conn = pgschema.connect(self.url, autocommit=True)
        self._used = time.monotonic()
        self.idle_check = IDLE_CHECK  # seconds unused after which the connection is looked at
        pgschema.ensure_schema(self._conn)
        self._enter_session(self._conn)
        sid = pgschema.store_id(self._conn, self.store_name, create=create and not read_only)
        if sid is None:
            self._conn.close()
            raise StoreNotFound(
                f"no store named {self.store_name!r} in {pgschema.shown(self.url)} — run"
                " 'memdir init' with the same --db and --store"
            )
        self.sid = sid
        self._w = Writer(sid, self.store_name, config)
        self._w.member = self.member
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
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
        self._reload()
        self._watch, self._opened = watch, time.monotonic()
        if watch:
            self._listen()

    def __repr__(self) -> str:
        return f"PgStore({pgschema.shown(self.url)!r}, store={self.store_name!r})"

    # -- connection and catching up ----------------------------------------------------------

    @contextlib.contextmanager
    def writing(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction on this store's connection (one thread at a time); the driver's
        failures as one line (``pgschema.explained``)."""
        with self._mu, pgschema.explained(self.url):
            self._alive()
            with self._conn.transaction():
                yield self._conn
            self._used = time.monotonic()

    @contextlib.contextmanager
    def reading(self) -> Iterator[psycopg.Connection[Any]]:
        """This store's connection for reads, each statement on its own (one round trip)."""
        with self._mu, pgschema.explained(self.url):
            self._alive()
            yield self._conn
            self._used = time.monotonic()

    def _alive(self) -> None:
        """A connection that works (``pgschema.working``), in this store's session."""
        idle = time.monotonic() - self._used > self.idle_check
        conn = pgschema.working(self._conn, self.url, idle)
        if conn is not self._conn:
            self._enter_session(conn)
            self._conn = conn

    def _enter_session(self, conn: psycopg.Connection[Any]) -> None:
        for sql, params in self.session:
            conn.execute(sql, params)

    def _writing(self) -> None:
        if self.read_only:  # an identity that may only read this store
            raise ReadOnlyStore(
                f"the store {self.store_name!r} is read-only here — nothing changed"
            )

    def _reload(self) -> None:
        with self.reading() as conn:
            seq, rows = self._w.catalogue(conn)
        self._entries = {r[0]: entry_of(r) for r in rows}
        self._names, self._seq = None, seq

    def catch_up(self) -> None:
        """Bring the catalogue up to date with every host's writes: nothing to do when the
        listener heard of none; else the memories the log names since the last look."""
        if self._listening and not self._dirty.is_set():
            return
        if self._watch is None and time.monotonic() - self._opened > WATCH_AFTER:
            self._watch = False  # tried once
            with contextlib.suppress(MemdirError):  # else: ask the counter, as before
                self._listen()  # still reading a while after opening: a long-running process
        self._dirty.clear()
        with self.reading() as conn:
            news = self._w.since(conn, self._seq)
        if news is not None:
            self._note(*news)

    def _note(self, changed: set[str], rows: list[tuple[Any, ...]], seq: int) -> None:
        for name in changed:
            self._entries.pop(name, None)
        for r in rows:
            self._entries[r[0]] = entry_of(r)
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
            except Exception as exc:  # the connection died: ask the counter at each read
                log.info("memdir: the database's notifications stopped (%s)", exc)
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
        self._writing()
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
        self.catch_up()

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
        path = self.root / INDEX_FILE
        from memdir.disk.atomic import write_atomic

        write_atomic(path, self.render_index().encode())
        return path

    def render_index(self) -> str:
        return render(self.entries(), self.config.types)

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
        self.catch_up()
        if self._names is None:
            self._names = sorted(self._entries)
        every = [self._entries[n] for n in self._names]
        return every if type is None else [e for e in every if e.type == type]

    def problems(self) -> _list[Problem]:
        return []  # the database holds only memories that passed the checks

    def get(self, name: str) -> Memory:
        norm = memfmt.validate_name(name)
        with self.reading() as conn:
            row = conn.execute(
                "SELECT text, digest FROM memdir_memories WHERE store = %s AND name = %s",
                (self.sid, norm),
            ).fetchone()
        if row is not None:
            return memory_of(norm, row[0], row[1])
        raise self._missing(norm)

    def _missing(self, name: str) -> MemoryNotFound:
        """The error for a name with no memory, saying which name was perhaps meant."""
        self.catch_up()
        close = difflib.get_close_matches(name, list(self._entries), n=1, cutoff=0.75)
        hint = f"did you mean {close[0]!r}?" if close else "see 'memdir list' for the names"
        return MemoryNotFound(f"no memory named {name!r} — {hint}")

    def __contains__(self, name: object) -> bool:
        self.catch_up()
        return isinstance(name, str) and name in self._entries

    def list(self, type: str | None = None) -> _list[Memory]:
        with self.reading() as conn:
            rows = conn.execute(
                "SELECT name, text, digest FROM memdir_memories WHERE store = %s"
                " AND (%s::text IS NULL OR type = %s) ORDER BY name",
                (self.sid, type, type),
            ).fetchall()
        return [memory_of(n, t, d) for n, t, d in rows]

    def __len__(self) -> int:
        self.catch_up()
        return len(self._entries)

    @property
    def version(self) -> int:
        self.catch_up()
        return self._seq

    # -- search --------------------------------------------------------------------------------

    def _ranker(self) -> PgSearch:
        if self._search is None:
            from memdir_postgres.pgsearch import PgSearch

            self._search = PgSearch(self, self._embedder)
        return self._search

    @property
    def index(self) -> PgSearch:
        """The store's ranking side (``Index``): postings and pgvector."""
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
        self._writing()
        for change in plan:
            if isinstance(change, Put):
                check_memory(change.memory, self.config)
        plan = screen(plan, secrets)
        op_id, stamp = new_op_id(), memfmt.now()
        try:
            with self.writing() as conn, conn.pipeline():  # statements sent together
                seq = self._w.next_seq(conn)
                records = self._w.write(conn, plan, op_id, stamp, seq)
                if not records:
                    raise _Unchanged
                op = Operation(op_id, stamp, source, summary, tuple(records), undoes)
                self._w.log(conn, op, seq)
                rows = conn.execute(
                    f"SELECT {COLUMNS} FROM memdir_memories WHERE store = %s AND name = ANY(%s)",
                    (self.sid, [r["name"] for r in records]),
                ).fetchall()
        except _Unchanged:
            return None
        if self._seq == seq - 1:  # nobody else wrote in between: no need to ask
            self._note({r["name"] for r in records}, rows, seq)
        return op

    def origin(self, name: str, digest: str | None = None) -> Origin:
        """Where the current text of ``name`` came from: the source of the last logged
        operation that wrote the digest it has now (``digest``: of the text the caller just
        read, else it is read)."""
        if digest is None:
            mem = self.get(name)
            name, digest = mem.name, mem.digest
        probe = json.dumps([{"name": name, "digest": digest}])
        with self.reading() as conn:
            row = conn.execute(
                "SELECT source, time, id, changes FROM memdir_log WHERE store = %s"
                " AND changes @> %s::jsonb ORDER BY seq DESC LIMIT 1",
                (self.sid, probe),
            ).fetchone()
        if row is None:
            return Origin(HAND)
        by = next((c.get("by") for c in row[3] if c.get("name") == name), None)
        return Origin(label_of(row[0], by), row[1], row[2])

    def record(self, summary: str, *, source: str, undoes: str | None = None) -> Operation:
        self._writing()
        op = Operation(new_op_id(), memfmt.now(), source, summary, (), undoes)
        with self.writing() as conn:
            self._w.log(conn, op, self._w.next_seq(conn))
        return op

    # -- history and log --------------------------------------------------------------------

    def history(self, name: str) -> _list[Version]:
        with self.reading() as conn:
            return self._w.versions(conn, memfmt.validate_name(name))

    def version_text(self, name: str, version: int) -> str:
        with self.reading() as conn:
            return self._w.version_text(conn, memfmt.validate_name(name), version)

    def log(self, limit: int | None = None) -> _list[Operation]:
        with self.reading() as conn:
            return self._w.operations(conn, limit)

    def _drop_versions(self, name: str, version: int | None) -> int:
        self._writing()
        with self.writing() as conn:
            return int(
                conn.execute(
                    "DELETE FROM memdir_history WHERE store = %s AND name = %s"
                    " AND (%s::int IS NULL OR version = %s)",
                    (self.sid, name, version, version),
                ).rowcount
            )

    def _carry_history(self, old: str, new: str) -> None:
        self._writing()
        with self.writing() as conn:
            self._w.check_new_names(conn, [new], {old})
            if not self.history(new):  # the past follows the name
                conn.execute(
                    "UPDATE memdir_history SET name = %s WHERE store = %s AND name = %s",
                    (new, self.sid, old),
                )

    # -- files in and out -------------------------------------------------------------------

    def take(self, items: Sequence[Taken], *, source: str) -> Operation | None:
        """As ``MemoryStore.take``, in one transaction."""
        self._writing()
        loaded = checked_items(items, self.config)
        with self.writing() as conn:
            op = self._w.take(conn, loaded, source)
        if len(loaded) >= 1000 and not self.member:  # a bulk load: the planner's statistics
            with self.reading() as conn:
                conn.execute("ANALYZE memdir_memories, memdir_postings, memdir_terms")
        self._reload()
        return op

    def text(self, name: str) -> str:
        norm = memfmt.validate_name(name)
        with self.reading() as conn:
            row = conn.execute(
                "SELECT text FROM memdir_memories WHERE store = %s AND name = %s",
                (self.sid, norm),
            ).fetchone()
        if row is None:
            raise self._missing(norm)
        return str(row[0])

    def retired(self) -> _list[str]:
        with self.reading() as conn:
            rows = conn.execute(
                "SELECT DISTINCT h.name FROM memdir_history h WHERE h.store = %s AND NOT EXISTS"
                " (SELECT 1 FROM memdir_memories m WHERE m.store = h.store AND m.name = h.name)"
                " ORDER BY 1",
                (self.sid,),
            ).fetchall()
        return [r[0] for r in rows]
