"""The live view of a store's folder: the catalogue of files kept current, the store's one
derived index (``storeindex``) in step with it, and MEMORY.md.

``Folder`` sweeps once, then asks the tracker (``watch``) what changed and looks at just that;
what changed goes into the index in one transaction. It verifies MEMORY.md against the
fingerprint of the files it was rendered from and rewrites it when the writers' lock is free
(``try_locked`` never waits). It also removes temporary files crashed writers left behind.
An index found damaged is deleted and built again from the files. A file that changed
without memdir writing it (edited or deleted by hand, a program, a plain ``git pull``) is
recorded when the lock is free: the text it replaced goes to history and one operation from
``hand`` to the log (``record_hand``), so it shows in ``memdir history`` and the UI's Activity
and ``memdir restore`` brings the old text back.
This module does NOT change memory files or take the lock itself: the store does both.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ... import memfile
from ...config import Config
from ...disk.atomic import TEMP_PREFIX, write_atomic
from ...disk.layout import INDEX_DB, INDEX_STATE, JOURNALS, LOG
from ...disk.statefile import read_json, write_hint
from ...disk.watch import Tracker
from ...entry import INDEX_FILE
from ...find.cachedb import damaged
from ...history import History
from . import catalog as idx
from .storeindex import StoreIndex

log = logging.getLogger("memdir")
T = TypeVar("T")


class Folder:
    """The catalogue, the store's index and the change tracker of one store folder."""

    def __init__(
        self,
        root: Path,
        internal: Path,
        config: Config,
        history: History,
        *,
        read_only: bool,
        watch: bool | None,
        try_locked: Callable[[Callable[[], None]], bool],
        caches: Path | None = None,
    ) -> None:
        self.root, self.internal, self.config, self.history = root, internal, config, history
        self.read_only = read_only
        self.try_locked = try_locked
        where = (caches or internal) / INDEX_DB
        # another's store with nowhere of its own to keep an index: one in memory
        self.index_db: Path | str = (
            ":memory:" if (read_only and caches is None) or where.is_symlink() else where
        )
        self.catalog = idx.Catalog(
            root, StoreIndex(self.index_db), config.types, config.max_file_bytes
        )
        self.tracker = Tracker(
            root, internal / LOG, [internal / name for name in JOURNALS], watch=watch
        )
        self.index_seen: tuple[tuple[int, ...], int] | None = None  # MEMORY.md key, version
        # how the store records changes memdir did not make (set by the store: its journal),
        # and whether an operation of its own holds the lock now (a sync's merge, a write):
        # then the files it changes are its own, and what it logs tells the rest apart later
        self.record_hand: Callable[[dict[str, bytes]], None] | None = None
        self.busy: Callable[[], bool] = lambda: False
        self.hand: dict[str, bytes] = {}  # texts such changes replaced, not recorded yet
        self.index_record: Any = None  # what INDEX_STATE says, once read

    @property
    def index_path(self) -> Path:
        return self.root / INDEX_FILE

    @property
    def db(self) -> StoreIndex:
        return self.catalog.db

    def sweep(self, progress: Callable[[int, int], None] | None = None) -> None:
        self.tracker.mark()
        self._on_index(lambda: self.catalog.sweep(progress), progress)
        self.save()
        self.repair()
        self.tracker.swept()  # (after MEMORY.md too: opening is not a sign of a long run)

    def _on_index(
        self, work: Callable[[], T], progress: Callable[[int, int], None] | None = None
    ) -> T:
        """``work`` on the store's index; one found damaged is built again from the files
        (every file parsed into a new one) and ``work`` done again."""
        try:
            return work()
        except sqlite3.DatabaseError as exc:
            if not damaged(exc):
                raise
            self.rebuild_index(exc)
            self.catalog.sweep(progress)
            return work()

    def rebuild_index(self, why: Exception | None) -> None:
        """Throw the store's index away (damaged, ``why``, or asked) and open an empty one:
        the next sweep parses every file again and fills it."""
        with contextlib.suppress(sqlite3.Error):
            self.catalog.db.close()
        self.catalog.db.discard()
        self.catalog.start_over(StoreIndex(self.index_db))
        if why is not None:
            log.warning(
                "memdir: the index of %s was damaged (%s); rebuilt from the files", self.root, why
            )

    def save(self) -> None:
        """Write what the catalogue parsed into the store's index (a damaged one is built
        again from the files), and record the changes memdir did not make."""
        replaced = self._on_index(self.catalog.save)
        for fname, text in replaced.items():
            self.hand.setdefault(fname, text)  # (the oldest text not recorded yet)
        if self.hand and self.record_hand is not None and not self.read_only and not self.busy():
            self.try_locked(self._record_hand)

    def _record_hand(self) -> None:
        """Under the lock: hand the texts that changes memdir did not make replaced to the
        store (a change a memdir writer made meanwhile is told apart by its log there)."""
        hand, self.hand = self.hand, {}
        assert self.record_hand is not None
        self.record_hand(hand)

    def catch_up(self) -> None:
        """Bring the catalogue up to date with what changed since this object last looked."""
        changes = self.tracker.poll()
        if changes.full:
            self.sweep()
            return
        if changes.names:
            self.catalog.names_changed()
        self.catalog.own |= changes.logged
        if changes.files or changes.logged:
            self.catalog.update(changes.files | changes.logged)
        self.catalog.recheck_recent()
        self.save()
        if changes.names or changes.files:  # not only memdir's own writes: MEMORY.md may lag
            self.repair()

    def index_current(self) -> bool:
        """Whether MEMORY.md says what the catalogue says: one ``lstat`` when nothing moved,
        and on opening, a comparison with the fingerprint of the files it was written from."""
        try:
            key = memfile.stat_key(os.lstat(self.index_path))
        except OSError:
            return False
        catalog = self.catalog
        if self.index_seen == (key, catalog.version):
            return True
        record = [list(key), catalog.fingerprint, list(self.config.types)]
        if self.index_record is None:
            saved = self._saved_index_records()
            self.index_record = record if record in saved else (saved[0] if saved else [])
        if self.index_record != record and self.read_index() != b"".join(catalog.render()):
            return False
        self.note_index(key)
        return True

    def _saved_index_records(self) -> list[Any]:
        """What MEMORY.md was last rendered from, as the last logged operation and the last
        repair recorded it."""
        records = [op["index"] for op in self.history.records(limit=1) if op.get("index")]
        saved = read_json(self.internal / INDEX_STATE).get("index")
        return records + ([saved] if saved else [])

    def note_index(self, key: tuple[int, ...], *, save: bool = True) -> None:
        """Remember which files MEMORY.md (with identity ``key``) was rendered from."""
        self.index_seen = (key, self.catalog.version)
        record = [list(key), self.catalog.fingerprint, list(self.config.types)]
        if record != self.index_record and not self.read_only:
            self.index_record = record
            if not save:
                return
            write_hint(self.internal / INDEX_STATE, {"index": record})

    def repair(self) -> None:
        """Rewrite MEMORY.md (and drop crashed writers' temp files) when the lock is free."""
        if self.read_only:
            return
        try:
            internal_temps = any(f.startswith(TEMP_PREFIX) for f in os.listdir(self.internal))
        except OSError:
            internal_temps = False
        if self.index_current() and not self.catalog.temp_files and not internal_temps:
            return

        def fix() -> None:
            self.catalog.update(self.tracker.poll().files)
            self.remove_temp_files()
            self.write_index()

        self.try_locked(fix)

    def remove_temp_files(self) -> None:
        """Delete temporary files of crashed writers (only called holding the lock)."""
        for folder in (self.root, self.internal):
            for fname in os.listdir(folder):
                if fname.startswith(TEMP_PREFIX):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(folder / fname)
        self.catalog.temp_files.clear()

    def read_index(self) -> bytes | None:
        try:
            return self.index_path.read_bytes()
        except OSError:
            return None

    def write_index(self, *, stale: bool = False, log: bool = False) -> None:
        """Write MEMORY.md from the catalogue (only called holding the lock); ``stale``: the
        caller knows it changed; ``log``: the operation log will record what it was rendered
        from (so no separate record is written), and the caller syncs the folder once for
        the memory files and MEMORY.md alike — MEMORY.md itself is not synced: it is derived,
        and a reader that finds it other than what the log says it was rendered from renders
        it again."""
        if stale or not self.index_current():
            # A new file renamed over the old one, as every file memdir writes: a reader keeps
            # the whole file it opened, and nothing another process does can stop the writer.
            write_atomic(
                self.index_path,
                b"".join(self.catalog.render()),
                sync=not self.read_only and not log,
            )
            self.note_index(memfile.stat_key(os.lstat(self.index_path)), save=not log)
