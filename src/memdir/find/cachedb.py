"""The SQLite file of derived data a store keeps: its index (the catalogue rows, full-text index
and vectors of its memories, and those of its episodes).

A file is opened in WAL mode without fsync (losing its tail costs a rebuild only); one that
cannot be written (a read-only store) is replaced by an in-memory database for the process,
and a damaged one is deleted and rebuilt. Each part kept in a file (the catalogue rows, the
full-text index, the vectors) records its own schema in the ``meta`` table and builds its
tables again when that differs; parts may share one file (``shared``), and then one
transaction (``transaction``) changes them together. Two parts of one kind in one file
differ by the ``prefix`` of their tables (the memories' full-text index and the episodes').
This module does NOT know what a part holds (subclasses create their tables).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any


class CacheDB:
    """One part of a derived SQLite file; ``_schema`` creates (or checks) its tables.
    ``shared``: another part whose file (and connection) this one lives in."""

    DOCS = "docs"  # the table of what is kept: key, identity (compared with the files')

    def __init__(
        self, path: Path | str = ":memory:", *, shared: CacheDB | None = None, prefix: str = ""
    ) -> None:
        self.prefix = prefix  # of this part's tables and of its name in ``meta``
        self._part = ""  # the part's name, once built
        # True while the part holds nothing it was not given in this process: the file was
        # new, damaged or of another schema — what a caller noted about it no longer holds
        self.rebuilt = False
        self.path: Path | str
        self.db: sqlite3.Connection
        if shared is not None:
            self.path, self.db = shared.path, shared.db
            self._schema(self.db)
            return
        self.path = path
        self.rebuilt = path == ":memory:" or not Path(str(path)).exists()
        try:
            self.db = self._open()
        except sqlite3.OperationalError:
            # Cannot be written (a read-only store): keep the cache in memory for this process.
            self.path = ":memory:"
            self.rebuilt = True
            self.db = self._open()
        except sqlite3.DatabaseError:
            # A damaged cache: it holds nothing that cannot be rebuilt from the files.
            self.discard()
            self.rebuilt = True
            self.db = self._open()

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(
            str(self.path), timeout=10, isolation_level=None, check_same_thread=False
        )
        try:
            if self.path != ":memory:":
                db.execute("PRAGMA journal_mode=WAL")  # readers do not wait for a writer
            db.execute("PRAGMA synchronous=OFF")  # a cache: losing the tail costs a rebuild only
            db.execute("BEGIN IMMEDIATE")  # fails now, not later, if the file cannot be written
            db.execute("ROLLBACK")
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            self._schema(db)
        except BaseException:
            db.close()
            raise
        return db

    def _schema(self, db: sqlite3.Connection) -> None:
        raise NotImplementedError

    @staticmethod
    def schema_of(db: sqlite3.Connection, part: str) -> str | None:
        """The schema a part of the file was built with (None: not built yet)."""
        row = db.execute("SELECT value FROM meta WHERE key = ?", (part,)).fetchone()
        return None if row is None else str(row[0])

    def built(self, db: sqlite3.Connection, part: str, schema: str, script: str) -> None:
        """Make sure ``part`` has tables of ``schema``: else run ``script`` (dropping and
        creating them) and record the schema, in one transaction."""
        part = self._part = self.prefix + part
        if self.schema_of(db, part) == schema:
            return
        self.rebuilt = True
        with self.transaction(db):
            for statement in script.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (part, schema))

    @contextlib.contextmanager
    def transaction(self, db: sqlite3.Connection | None = None) -> Iterator[sqlite3.Connection]:
        """One write transaction on ``db`` (default: the cache's own connection; within one
        already open on it: part of it)."""
        db = self.db if db is None else db
        if db.in_transaction:
            yield db
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def reset(self) -> None:
        """Empty this part: its tables dropped and made again, in one transaction."""
        with self.transaction() as db:
            db.execute("DELETE FROM meta WHERE key = ?", (self._part,))
            self._schema(db)

    def discard(self) -> None:
        """Delete the file (damaged): it is built again from the files."""
        if self.path == ":memory:":
            return
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                Path(str(self.path) + suffix).unlink()

    def close(self) -> None:
        """Close the database."""
        self.db.close()

    def select_in(self, sql: str, values: Sequence[Any]) -> Iterator[Any]:
        """The rows of ``sql`` (whose ``{}`` is an ``IN`` list) for all ``values``, asked 500
        at a time (SQLite bounds the number of parameters)."""
        for i in range(0, len(values), 500):
            part = list(values[i : i + 500])
            yield from self.db.execute(sql.format(",".join("?" * len(part))), part)

    def compare(
        self, current: dict[str, str | None], only: list[str] | None
    ) -> tuple[list[str], list[str]]:
        """The keys of ``current`` (key -> file identity) to read again, and the kept keys
        to drop. A None identity is always read again (the file changed too recently for its
        identity to be trusted). With ``only``, just those keys are compared."""
        sql = f"SELECT key, identity FROM {self.prefix}{self.DOCS}"
        if only is None:
            indexed = dict(self.db.execute(sql).fetchall())
        else:
            indexed = dict(self.select_in(sql + " WHERE key IN ({})", only))
        stale = [k for k, ident in current.items() if ident is None or indexed.get(k) != ident]
        removed = [k for k in indexed if k not in current]
        return stale, removed


def damaged(exc: sqlite3.DatabaseError) -> bool:
    """Whether the cache is to be rebuilt: anything SQLite says but that the file is busy or
    locked by another process (damaged pages, text that is not UTF-8 any more, not a
    database at all). A rebuild that meets the same error lets it through."""
    message = str(exc).lower()
    return not isinstance(exc, sqlite3.OperationalError) or not any(
        word in message for word in ("locked", "busy", "interrupted")
    )
