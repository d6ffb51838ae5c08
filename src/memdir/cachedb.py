"""A derived cache in one SQLite file: the search index and the vectors are both one.

The file is opened in WAL mode without fsync (losing its tail costs a rebuild only); one that
cannot be written (a read-only store) is replaced by an in-memory database for the process,
and a damaged one is deleted and rebuilt. Documents are tracked in a ``docs`` table with
``key`` and ``identity`` columns, compared with the files' identities to find what changed.
This module does NOT know what a cache holds (subclasses create their tables).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

# The catalogue (names and identities of the files) the documents were last found to match;
# any write to the documents forgets it, in every process.
_IN_LINE = """
    CREATE TABLE IF NOT EXISTS in_line (id INTEGER PRIMARY KEY CHECK (id = 1), token TEXT);
    INSERT OR IGNORE INTO in_line VALUES (1, NULL);
    CREATE TRIGGER IF NOT EXISTS docs_added AFTER INSERT ON docs
        BEGIN UPDATE in_line SET token = NULL; END;
    CREATE TRIGGER IF NOT EXISTS docs_changed AFTER UPDATE ON docs
        BEGIN UPDATE in_line SET token = NULL; END;
    CREATE TRIGGER IF NOT EXISTS docs_removed AFTER DELETE ON docs
        BEGIN UPDATE in_line SET token = NULL; END;
"""


class CacheDB:
    """The SQLite side of a cache; ``_schema`` creates (or checks) its tables."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        # True while the cache holds nothing it was not given in this process: the file was
        # new, damaged or of another schema (a subclass's ``_schema`` says so) — what a
        # caller noted elsewhere about its contents no longer holds
        self.rebuilt = not Path(str(path)).exists()
        try:
            self.db = self._open()
        except sqlite3.OperationalError:
            # Cannot be written (a read-only store): keep the cache in memory for this process.
            self.path = ":memory:"
            self.rebuilt = True
            self.db = self._open()
        except sqlite3.DatabaseError:
            # A damaged cache: it holds nothing that cannot be rebuilt from the files.
            self._discard()
            self.rebuilt = True
            self.db = self._open()

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(
            str(self.path), timeout=10, isolation_level=None, check_same_thread=False
        )
        if self.path != ":memory:":
            db.execute("PRAGMA journal_mode=WAL")  # readers do not wait for a writer
        db.execute("PRAGMA synchronous=OFF")  # a cache: losing the tail costs a rebuild only
        db.execute("BEGIN IMMEDIATE")  # fails now, not later, if the file cannot be written
        db.execute("ROLLBACK")
        self._schema(db)
        db.executescript(_IN_LINE)
        if self.rebuilt:
            db.execute("UPDATE in_line SET token = NULL")
        return db

    def _schema(self, db: sqlite3.Connection) -> None:
        raise NotImplementedError

    def _discard(self) -> None:
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

    def in_line_with(self, token: str) -> bool:
        """Whether the documents were found to match the files whose catalogue ``token``
        names, with no document written since (by any process: triggers forget the token)."""
        row = self.db.execute("SELECT token FROM in_line").fetchone()
        return row is not None and row[0] == token

    def note_in_line(self, token: str, current: dict[str, str | None]) -> None:
        """Remember that the documents match ``current`` (key -> identity), the files whose
        catalogue ``token`` names: checked again inside one write transaction, so that no
        other writer comes in between. Skipped when another process holds the cache's lock
        now (the next process checks again) or an identity is not trusted yet."""
        if None in current.values():
            return
        db = self.db
        db.execute("PRAGMA busy_timeout = 0")
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return
        finally:
            db.execute("PRAGMA busy_timeout = 10000")
        try:
            if dict(db.execute("SELECT key, identity FROM docs").fetchall()) == current:
                db.execute("UPDATE in_line SET token = ?", (token,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def compare(
        self, current: dict[str, str | None], only: list[str] | None
    ) -> tuple[list[str], list[str]]:
        """The keys of ``current`` (key -> file identity) to read again, and the cached keys
        to drop. A None identity is always read again (the file changed too recently for its
        identity to be trusted). With ``only``, just those keys are compared."""
        if only is None:
            indexed = dict(self.db.execute("SELECT key, identity FROM docs").fetchall())
        else:
            indexed = dict(self.select_in("SELECT key, identity FROM docs WHERE key IN ({})", only))
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
