"""The metadata cache: what each memory file parsed to, keyed by the file's identity.

A snapshot (``meta.json``) plus an append-only log of rows changed since (``meta.log``), so
recording one changed file costs one small append. It is disposable: every row is checked
against the file's current identity before it is trusted.
This module does NOT read memory files (the catalogue does) or decide when to save.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from .atomic import append_nofollow, write_atomic
from .entry import Entry

CACHE_VERSION = 4  # raised when parsing rules change what a file parses to (`lookup` notes it too)
OVERLAP_BYTES = 4_000_000  # rows this large (about 20,000 files) are read while a copy lists


class MetaCache:
    """Parsed metadata keyed by file identity (disposable): a snapshot plus an append-only log.

    ``meta.json`` holds rows for every file; ``meta.log`` holds rows changed since, one JSON
    line each, so recording one changed file costs one small append. The log is folded into
    the snapshot when it grows. A torn or stale row only costs re-parsing one file, because
    every row is checked against the file's current identity before it is trusted.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.log_path = path.with_suffix(".log")
        self._files: dict[str, tuple[tuple[int, ...], Entry | None, str | None]] | None = None
        self.pending: dict[str, None] = {}  # files whose rows changed (made into rows when saved)
        self.log_rows = 0

    @property
    def files(self) -> dict[str, tuple[tuple[int, ...], Entry | None, str | None]]:
        """Each file's identity and what it parsed to (read from disk on first use)."""
        if self._files is None:
            self.load()
        assert self._files is not None
        return self._files

    def to_load(self) -> bool:
        """Whether the rows of many files are still to be read (worth doing something else
        meanwhile: a forked copy lists the folder)."""
        if self._files is not None:
            return False
        size = 0
        for path in (self.path, self.log_path):
            with contextlib.suppress(OSError):
                size += os.stat(path).st_size
        return size >= OVERLAP_BYTES

    def load(self) -> None:
        """Read the snapshot and the log (once; a damaged or older one reads as empty)."""
        if self._files is not None:
            return
        self._files = {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("version") == CACHE_VERSION:
                for row in data["rows"]:
                    self._load_row(self._files, row)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self._files = {}
        try:
            with open(self.log_path, encoding="utf-8") as fh:
                for line in fh:
                    self.log_rows += 1
                    try:
                        self._load_row(self._files, json.loads(line))
                    except (ValueError, TypeError, KeyError, IndexError):
                        continue  # a torn line
        except OSError:
            pass

    @staticmethod
    def _load_row(files: dict[str, Any], row: list[Any]) -> None:
        fname = row[0]
        if len(row) == 1:
            files.pop(fname, None)
        elif len(row) == 5:
            files[fname] = (tuple(row[1:4]), None, row[4])
        else:
            files[fname] = (tuple(row[1:4]), Entry.from_row(row, fname), None)

    @staticmethod
    def _row(fname: str, key: tuple[int, ...], entry: Entry | None, error: str | None) -> list[Any]:
        if entry is None:
            return [fname, *key, error]
        return [
            fname,
            *key,
            entry.name,
            entry.type,
            entry.description,
            entry.created,
            entry.updated,
            entry.pinned,
            list(entry.warnings),
        ]

    def save(self, *, force: bool = False) -> None:
        """Persist what changed; losing a race with another process only costs re-parsing."""
        if not self.pending and not force:
            return
        try:
            if force or self.log_rows + len(self.pending) > max(100, len(self.files) // 10):
                self._write_snapshot()
            else:
                rows = (self._current_row(f) for f in self.pending)
                lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
                append_nofollow(self.log_path, lines.encode())
                self.log_rows += len(self.pending)
        except OSError:
            return  # a read-only store still works, only slower
        self.pending.clear()

    def _current_row(self, fname: str) -> list[Any]:
        rec = self.files.get(fname)
        return [fname] if rec is None else self._row(fname, *rec)

    def _write_snapshot(self) -> None:
        rows = [self._row(f, *rec) for f, rec in self.files.items()]
        data = json.dumps({"version": CACHE_VERSION, "rows": rows}, ensure_ascii=False)
        write_atomic(self.path, data.encode(), sync=False)  # a cache: no fsync
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.log_path)
        self.log_rows = 0

    def remember(
        self, file: str, key: tuple[int, ...], entry: Entry | None, error: str | None
    ) -> tuple[tuple[int, ...], Entry | None, str | None]:
        """Record what a file with this identity parsed to; the record, which the catalogue
        shares (one object a file, not two, for the collector to look at)."""
        rec = self.files[file] = (key, entry, error)
        self.pending[file] = None
        return rec

    def forget(self, file: str) -> None:
        """Drop a file that no longer exists."""
        del self.files[file]
        self.pending[file] = None
