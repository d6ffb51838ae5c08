"""A folder store's one derived index: a SQLite file in the store's state folder holding, per
memory file, its identity and what it parsed to (the catalogue's row), its full-text
document, and its vector — each change to them made in one transaction.

It is a cache: the folder is the truth. Deleted, damaged or of an older schema, it is built
again from the files (the catalogue's sweep parses each file and writes its row and document
together); rows are trusted only for a file whose identity (size, mtime, inode) is unchanged.
A row for a file changed too recently for its identity to be trusted is kept without one, so
every process reads that file again. Each file's text is kept as it was read (apart from the
rows), so that when a file changes without memdir writing it (a hand edit, a plain ``git
pull``) the text it replaced can still go to history (``write`` returns it).
This module does NOT read memory files or look at the folder (``index.Catalog`` does).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...entry import Entry
from ...find.cachedb import CacheDB
from ...memory import Memory

if TYPE_CHECKING:
    from ...find.embed import Embedder
    from ...find.search import SearchIndex
    from ...find.vectors import VectorIndex

# raised when parsing rules change what a file parses to, or the rows' shape changes
ROWS_VERSION = 7

Key = tuple[int, ...]  # a file's identity: size, mtime (ns), inode


@dataclass(frozen=True)
class Parsed:
    """What one file held when it was read: its identity (None: too recent to trust), its
    entry or why it is not a memory, and the memory itself (for its full-text document)."""

    key: Key | None
    entry: Entry | None
    error: str | None
    memory: Memory | None
    text: bytes | None = None  # the file's bytes as read


def identity(key: Key | None) -> str | None:
    """A file's identity as the index's tables keep it."""
    return None if key is None else f"{key[0]}:{key[1]}:{key[2]}"


class StoreIndex(CacheDB):
    """The catalogue rows of a store's files, with its full-text index (``text``) and its
    vectors (``vectors``) in the same file."""

    DOCS = "files"

    def __init__(self, path: Path | str = ":memory:") -> None:
        self._vectors: VectorIndex | None = None
        super().__init__(path)
        from ...find.search import SearchIndex

        self.text: SearchIndex = SearchIndex(shared=self)
        if self.rebuilt != self.text.rebuilt:  # one part of another age: both from the files
            with self.transaction() as db:
                db.execute("DELETE FROM meta WHERE key = 'search'")
                db.execute("DELETE FROM files")
                self.text = SearchIndex(shared=self)
            self.rebuilt = True

    def _schema(self, db: sqlite3.Connection) -> None:
        self.built(
            db,
            "files",
            str(ROWS_VERSION),
            """
                DROP TABLE IF EXISTS files;
                DROP TABLE IF EXISTS texts;
                CREATE TABLE files (key TEXT PRIMARY KEY, identity TEXT, name TEXT, type TEXT,
                    description TEXT, created TEXT, updated TEXT, pinned INTEGER,
                    warnings TEXT, error TEXT);
                CREATE TABLE texts (key TEXT PRIMARY KEY, text BLOB)
            """,
        )

    def rows(self) -> dict[str, tuple[Key | None, Entry | None, str | None]]:
        """Every file's row: its identity (None: read it again), its entry or why it is not
        a memory."""
        out: dict[str, tuple[Key | None, Entry | None, str | None]] = {}
        for (
            fname,
            ident,
            name,
            type_,
            desc,
            created,
            updated,
            pinned,
            warnings,
            error,
        ) in self.db.execute(
            "SELECT key, identity, name, type, description, created, updated, pinned, warnings,"
            " error FROM files"
        ):
            key = None if ident is None else tuple(int(p) for p in ident.split(":"))
            entry = None
            if name is not None:
                entry = Entry.from_row(
                    (name, type_, desc, created, updated, bool(pinned), _warnings(warnings)),
                    fname,
                    0,
                )
            out[fname] = (key, entry, error)
        return out

    def write(self, changed: Mapping[str, Parsed | None]) -> dict[str, bytes]:
        """Record what these files hold now (None: gone), rows and documents, in one
        transaction; a file whose row already has this identity (another process saw it
        first) is left as it is. The texts the rows held that were replaced or removed."""
        if not changed:
            return {}
        replaced: dict[str, bytes] = {}
        with self.transaction() as db:
            known, was = {}, {}
            for fname, ident, text in self.select_in(
                "SELECT files.key, identity, text FROM files LEFT JOIN texts"
                " ON texts.key = files.key WHERE files.key IN ({})",
                list(changed),
            ):
                known[fname], was[fname] = ident, text
            for fname, got in changed.items():
                old = was.get(fname)
                if old is not None and (got is None or got.text != old):
                    replaced[fname] = bytes(old)
            from ...find.search import Doc

            gone: list[str] = []  # files no longer there
            undocumented: list[str] = []  # files that are not memories (no document)
            docs: list[Doc] = []
            rows = []
            texts = []  # (kept apart from the rows: reading every row stays cheap)
            for fname, got in changed.items():
                if got is None:
                    if fname in known:
                        gone.append(fname)
                    continue
                ident = identity(got.key)
                if ident is not None and known.get(fname) == ident:
                    continue
                texts.append((fname, got.text))
                e = got.entry
                rows.append(
                    (fname, ident, None, None, None, None, None, None, None, got.error)
                    if e is None
                    else (
                        fname,
                        ident,
                        e.name,
                        e.type,
                        e.description,
                        e.created,
                        e.updated,
                        int(e.pinned),
                        json.dumps(list(e.warnings)) if e.warnings else None,
                        None,
                    )
                )
                if e is None or got.memory is None:
                    undocumented.append(fname)
                else:
                    m = got.memory
                    docs.append(Doc(fname, ident, m.name, m.description, m.body))
            db.executemany("DELETE FROM files WHERE key = ?", [(f,) for f in gone])
            db.executemany("DELETE FROM texts WHERE key = ?", [(f,) for f in gone])
            db.executemany("INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
            db.executemany("INSERT OR REPLACE INTO texts VALUES (?, ?)", texts)
            self.text.update(docs, gone + undocumented)
        return replaced

    def vectors(self, embedder: Embedder) -> VectorIndex:
        """The vectors part, for this embedder (emptied when the file holds another's)."""
        if self._vectors is None or self._vectors.embedder is not embedder:
            from ...find.vectors import VectorIndex

            self._vectors = VectorIndex(self.path, embedder, shared=self)
        return self._vectors

    def vector_count(self) -> int:
        """How many files have a vector (of whichever embedder made them)."""
        try:
            return int(self.db.execute("SELECT count(*) FROM vec_docs").fetchone()[0])
        except sqlite3.OperationalError:  # (no vectors part yet)
            return 0


def _warnings(text: str | None) -> list[str]:
    return [] if not text else list(json.loads(text))
