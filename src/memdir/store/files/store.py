"""``MemoryStore``: reading and changing the memories of one folder, safely.

It owns the writers' lock, the journal that makes multi-file changes crash-safe, and keeping
the catalogue of memories and ``MEMORY.md`` in step with the files at a cost that follows the
change: a write touches its own files, one row of each cache and one search document; a read
asks the tracker (``watch``) what changed since it last looked. Every change goes through
``apply(plan)``. Readers never wait for the lock.
It does NOT decide what to remember (extract, consolidate) and does NOT talk to an LLM.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ... import memfile
from ... import memory as memfmt
from ...config import Config, store_config
from ...disk.atomic import write_atomic, write_intent
from ...disk.layout import HISTORY, JOURNAL, LOG, state_dir
from ...disk.lock import WritersLock, not_a_link, open_folder
from ...entry import INDEX_FILE, Entry, Problem
from ...errors import ConflictError, InvalidMemory, MemdirError, MemoryNotFound
from ...gate.provenance import Ledger, Origin
from ...history import History, Journal, Operation, Version
from ...memory import Memory
from ...plan import Change, Put, new_op_id, screen
from ..base import Store, StoreBase, Taken, checked_items
from .folder import Folder
from .lookup import Lookup
from .transaction import Transaction, unfinished

if TYPE_CHECKING:  # imported on first search: sqlite3 and the stemmer cost start-up time
    from ...find.embed import Embedder


_list = list  # ``MemoryStore.list`` shadows the builtin inside the class body


class MemoryStore(StoreBase):
    """The memories in one folder.

    ``config``: as given (``config.load_config`` resolves it as the ``memdir`` command does,
    the environment included), else the defaults and the store's own ``config.toml``
    (``config.store_config``; no environment variable is read below an entry point).
    ``create``: make the folder if it is missing (else raise StoreNotFound). ``watch``: start
    a file-system watcher at once (True), never (False), or when the process turns out to be
    long-running (None).
    ``progress(done, total)`` is called while a first open parses files.
    ``embedder``: embeds memories for hybrid search, instead of the one the configuration names
    (``embed.Embedder``: a name, a dimension and ``embed(texts)``). ``cache_dir``: open the
    store read-only and keep its caches (metadata, search index, vectors) there, so that
    nothing is ever written into the folder (a shared store another team owns).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ".memory",
        config: Config | None = None,
        *,
        create: bool = True,
        watch: bool | None = None,
        progress: Callable[[int, int], None] | None = None,
        embedder: Embedder | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        self.root = Path(path)
        self.config = config or store_config(self.root)
        self.read_only = open_folder(self.root, create=create, cache_dir=cache_dir)
        self.internal = state_dir(self.root)
        self._writers = WritersLock(
            self.root, self.internal, self.config.lock_timeout, self.read_only
        )
        self._history = History(self.internal / HISTORY, self.internal / LOG)
        self._ledger: Ledger | None = None  # read on the first origin() asked
        self._folder = Folder(
            self.root,
            self.internal,
            self.config,
            self._history,
            read_only=self.read_only,
            watch=watch,
            try_locked=self._try_locked,
            caches=cache_dir,
        )
        self._catalog = self._folder.catalog
        self._tracker = self._folder.tracker
        self._lookup = Lookup(
            self.root,
            cache_dir or self.internal,
            self.config,
            self._folder,
            in_memory=self.read_only and cache_dir is None,
            embedder=embedder,
        )
        if self.read_only:
            self._lookup.hand_over = False  # another's store: nothing started on its behalf
            self._lookup.background = False
        self._tx = Transaction(self._folder)
        self._folder.record_hand = self._record_hand
        self._folder.busy = lambda: self._writers.holding
        if unfinished(self.internal):
            try:
                self._try_locked(self._tx.recover)
            except (ConflictError, OSError):
                pass  # left for 'memdir doctor' to report; reading still works
        self._folder.sweep(progress)

    # -- locking ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the writers' lock (re-entrant within one store object)."""
        with self._writers.held():
            yield

    def _read_entry(self, entry: Entry) -> Memory:
        return self._tx.current(entry)

    def _try_locked(self, fn: Callable[[], None]) -> bool:
        """Run ``fn`` holding the lock if it is free right now; never wait (readers use this
        to finish a crashed writer's journal or repair MEMORY.md)."""
        return self._writers.try_run(fn)

    # -- keeping up with the folder ---------------------------------------------------------

    def refresh(self) -> None:
        """Look at every file now (hand edits included) and repair MEMORY.md if needed."""
        self._folder.sweep()

    def rebuild(self) -> dict[str, Entry]:
        """Forget the store's index, re-parse every file and rewrite MEMORY.md if needed."""
        with self.locked():
            self._folder.rebuild_index(None)
            self._tracker.mark()
            self._catalog.sweep()
            self._folder.save()
            self._folder.remove_temp_files()
            self._folder.write_index()
        return dict(self._catalog.entries)

    def reopen(self) -> MemoryStore:
        """Another object on the same store (a thread's own: caches and connections are not
        shared)."""
        return MemoryStore(self.root, self.config, watch=False)

    def close(self) -> None:
        """Stop the file-system watcher (the store stays usable)."""
        self._tracker.close()
        self._lookup.close()

    @property
    def index_path(self) -> Path:
        """The path of MEMORY.md."""
        return self.root / INDEX_FILE

    @property
    def location(self) -> str:
        """Where the memories are, as a person reads it (the folder)."""
        return str(self.root.absolute())

    def where_kept(self) -> str:
        """Where the memories are, as the system prompt says it."""
        return f"Markdown files in `{self.root}`"

    def place_of(self, name: str) -> Path | str:
        """Where the memory called ``name`` is kept: its file."""
        return self.root / memfmt.filename_for(memfmt.validate_name(name))

    @property
    def watching(self) -> bool:
        """Whether a file-system watcher reports hand edits to this process."""
        return self._tracker.watching

    # -- reading ----------------------------------------------------------------------------

    def entries(self, type: str | None = None) -> _list[Entry]:
        """Metadata of every memory (no bodies), sorted by name."""
        self._folder.catch_up()
        entries = self._catalog.entries
        if type is None:
            return [entries[n] for n in self._catalog.names]
        return [entries[n] for n in self._catalog.groups.get(type, [])]

    def problems(self) -> _list[Problem]:
        """Files that are not valid memories, and rules that listed memories bend."""
        self._folder.catch_up()
        return self._catalog.problems()

    def get(self, name: str) -> Memory:
        """The memory called ``name``; raise MemoryNotFound."""
        norm = memfmt.validate_name(name)
        self._folder.catch_up()
        for _ in range(2):  # (a file changed under us is read once more)
            entry = self._catalog.entries.get(norm)
            if entry is None:
                break
            try:
                mem = self._tx.current(entry)
            except InvalidMemory:
                mem = None
            # what was just read is what the catalogue says next, even where an edit in place
            # has not reached this process's watcher yet (one lstat); if it changed under
            # us, the next attempt looks again
            self._catalog.update([entry.file])
            if mem is not None and mem.name == norm:
                return mem
        close = difflib.get_close_matches(norm, self._catalog.names, n=1, cutoff=0.75)
        hint = f"did you mean {close[0]!r}?" if close else "see 'memdir list' for the names"
        raise MemoryNotFound(f"no memory named {norm!r} — {hint}")

    def __contains__(self, name: object) -> bool:
        self._folder.catch_up()
        return isinstance(name, str) and name in self._catalog.entries

    def list(self, type: str | None = None) -> _list[Memory]:
        """Every memory, with its body, sorted by name."""
        out = []
        for e in self.entries(type):
            try:
                out.append(self._tx.current(e))
            except InvalidMemory:
                continue  # changed under us since the scan; the next look reports it
        return out

    @property
    def index(self) -> Lookup:
        """The store's ranking side (``Index``): its index's full text and vectors."""
        return self._lookup

    def entry_at(self, key: str) -> Entry | None:
        """The current memory in file ``key`` (as rankings name them), if any."""
        rec = self._catalog.state.get(key)
        entry = rec[1] if rec else None
        return (
            entry if entry is not None and self._catalog.entries.get(entry.name) is entry else None
        )

    def __len__(self) -> int:
        self._folder.catch_up()
        return len(self._catalog.entries)

    @property
    def version(self) -> int:
        """A number that changes whenever the listed memories change (for callers that cache
        what they derive from ``entries``)."""
        self._folder.catch_up()
        return self._catalog.version

    # -- writing ----------------------------------------------------------------------------

    def apply(
        self,
        plan: Sequence[Change],
        *,
        source: str = "api",
        summary: str = "",
        secrets: str = "refuse",
        undoes: str | None = None,
    ) -> Operation | None:
        """Apply a list of changes as one transaction; None when nothing changed.

        ``secrets`` says what to do with credentials in the text: "refuse" (raise SecretFound,
        the default), "redact" (automatic paths) or "allow" (the user insisted).
        """
        limit = self.config.max_file_bytes
        for change in plan:  # before the secrets scan, whose cost grows with the text
            if isinstance(change, Put) and len(change.memory.body) > limit:
                raise InvalidMemory(
                    f"memory {change.memory.name!r} is over the {limit // 1024} KiB limit —"
                    " shorten the body or split it into several memories"
                )
        plan = screen(plan, secrets)
        with self.locked():
            self._folder.catch_up()
            steps = self._tx.prepare(plan)
            if not steps:
                return None
            self._tx.preflight(steps)
            op: Journal = {
                "id": new_op_id(),
                "time": memfmt.now(),
                "source": source,
                "summary": summary,
                "steps": steps,
                "undoes": undoes,
            }
            write_intent(self.internal / JOURNAL, json.dumps(op, ensure_ascii=False).encode())
            return self._tx.execute(op)

    def record(self, summary: str, *, source: str, undoes: str | None = None) -> Operation:
        """Log an operation that changed no file (so that undo can tell it was handled)."""
        with self.locked():
            self._folder.catch_up()
            op = Operation(new_op_id(), memfmt.now(), source, summary, (), undoes)
            self._tx.log(op)
        return op

    def adopt(
        self,
        before: Mapping[str, bytes | None],
        *,
        source: str,
        summary: str,
        reason: str = "",
        others: Mapping[str, bytes] | None = None,
        authors: Mapping[str, str] | None = None,
    ) -> Operation | None:
        """Record what something else (a git merge) did to the folder: each file of ``before``
        (its bytes then; None: absent) that differs now keeps its old text in history, and
        one logged operation lists the changes (history, undo and MEMORY.md follow).
        ``others``: more texts to keep, by name (a conflict's losing side); ``authors``: who
        changed each file elsewhere (its provenance). None: no change."""
        with self.locked():
            return self._tx.adopt(
                before,
                source=source,
                summary=summary,
                reason=reason,
                others=others,
                authors=authors,
            )

    def take(self, items: Sequence[Taken], *, source: str) -> Operation | None:
        """Bring in memories as another store holds them, as one logged operation: each
        ``(name, file text or None for a retired memory, history)``, the text as it is (byte
        for byte), the history versions with their numbers and times. ConflictError, before
        anything is written, when a name is taken."""
        loaded = checked_items(items, self.config)
        with self.locked():
            self._folder.catch_up()
            planned = {name for name, _, _, _ in loaded}
            for name, _, _, _ in loaded:
                if name in self or self._history.versions(name):
                    raise ConflictError(
                        f"the store already has a memory (or history) named {name!r} —"
                        " import into an empty store"
                    )
                self._tx.check_new_name(name, memfmt.filename_for(name), planned)
            before: dict[str, bytes | None] = {}
            for name, _, text, versions in loaded:
                for version, vtext in versions:
                    self._history.put(version, vtext.encode())
                if text is not None:
                    fname = memfmt.filename_for(name)
                    write_atomic(self.root / fname, text.encode())
                    before[fname] = None
            return self._tx.adopt(
                before, source=source, summary="import", reason="imported", others=None
            )

    def text(self, name: str) -> str:
        """The memory's file text exactly as stored (``get`` parses it); MemoryNotFound."""
        mem = self.get(name)
        fname = self._catalog.entries[mem.name].file
        return memfile.read_file(self.root / fname, self.config.max_file_bytes).decode("utf-8")

    def retired(self) -> _list[str]:
        """Names that have history but no current memory (deleted or renamed away)."""
        root = self._history.root
        names = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        self._folder.catch_up()
        return [n for n in names if n not in self._catalog.entries]

    # -- history and log --------------------------------------------------------------------

    def history(self, name: str) -> _list[Version]:
        """Earlier versions of ``name``, oldest first (also for deleted memories)."""
        return self._history.versions(memfmt.validate_name(name))

    def version_text(self, name: str, version: int) -> str:
        """The file text of one history version; raise MemoryNotFound."""
        return self._history.text(memfmt.validate_name(name), version)

    def log(self, limit: int | None = None) -> _list[Operation]:
        """Applied operations, oldest first (the last ``limit`` of them)."""
        return self._history.log(limit)

    def origin(self, name: str, digest: str | None = None) -> Origin:
        """Where the current text of ``name`` came from, as this store's log recorded it
        (``provenance``): never what the file says of itself. ``digest``: of the text the
        caller just read (else it is read)."""
        if digest is None:
            mem = self.get(name)
            name, digest = mem.name, mem.digest
        if self._ledger is None:
            self._ledger = Ledger(self.internal / LOG)
        return self._ledger.origin(name, digest)

    def _record_hand(self, before: dict[str, bytes]) -> None:
        """Record changes memdir did not make (called holding the lock): each file's text
        before them goes to history and one operation from ``hand`` to the log — unless the
        log says memdir itself made the change (a writer in another process)."""
        if self._ledger is None:
            self._ledger = Ledger(self.internal / LOG)
        keep: dict[str, bytes | None] = {}
        for fname, old in before.items():
            try:
                now: bytes | None = memfile.read_file(self.root / fname, self.config.max_file_bytes)
            except InvalidMemory:
                now = None
            was = _name_of(old, fname)
            if now == old or was is None:
                continue
            named = was if now is None else (_name_of(now, fname) or was)
            holder = self._catalog.entries.get(named)
            if holder is not None and holder.file != fname:
                continue  # another file is that memory: this one was a copy (the same name twice)
            if self._ledger.logged(named, None if now is None else memfmt.digest_of(now)):
                continue  # memdir's own change, from another process
            keep[fname] = old
        if keep:
            names = sorted(filter(None, (_name_of(t, f) for f, t in keep.items() if t)))
            self._tx.adopt(
                keep,
                source="hand",
                summary="changed outside memdir: " + ", ".join(names),
                reason="changed outside memdir",
                others=None,
            )

    def _drop_versions(self, name: str, version: int | None) -> int:
        gone = self._history.purge(name, version)
        if gone:  # nothing of the purged text left in the index's free pages either
            self.rebuild()
        return gone

    def _carry_history(self, old: str, new: str) -> None:
        self._tx.check_new_name(new, memfmt.filename_for(new), {old})
        before, after = self._history.versions_dir(old), self._history.versions_dir(new)
        not_a_link(before, "folder")
        if before.is_dir() and not os.path.lexists(after):
            os.rename(before, after)  # the past follows the name (same folder: atomic)


def _name_of(text: bytes | None, fname: str) -> str | None:
    """The memory name a file's text holds (None: not a memory)."""
    if text is None:
        return None
    try:
        return memfile.parse(text, fname).name
    except InvalidMemory:
        return None


def as_folder(
    store: Store,
    refusal: str = "a database store is not synced through git — 'memdir export DIR' writes a"
    " copy as files",
) -> MemoryStore:
    """``store`` as the folder it is, for what only a folder does (git sync, adopting a
    merge, taking back state kept in the folder); MemdirError saying ``refusal`` for a
    database store."""
    if isinstance(store, MemoryStore):
        return store
    raise MemdirError(refusal)
