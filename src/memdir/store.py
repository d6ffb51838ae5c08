"""``MemoryStore``: reading and changing the memories of one folder, safely.

It owns atomic writes, the writers' lock, history of every overwritten or deleted version,
the journal that makes multi-file changes crash-safe, the operation log, and keeping
``MEMORY.md`` in step with the files. Every change goes through ``apply(plan)``.
It does NOT decide what to remember (extract, consolidate) and does NOT talk to an LLM.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets as _random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import filelock

from . import index as idx
from . import memory as memfmt
from .atomic import TEMP_PREFIX, fsync_dir, write_atomic
from .config import Config
from .errors import ConflictError, InvalidMemory, MemoryNotFound, PlanError, StoreLocked
from .history import History, Operation, Version
from .memory import Memory
from .plan import Change, Put, Remove, screen

if TYPE_CHECKING:  # imported on first search: sqlite3 and the stemmer cost start-up time
    from .search import SearchIndex

INTERNAL = ".memdir"
JOURNAL = "journal.json"
LOG = "log.jsonl"
FRESH_SECONDS = 0.2  # a read this soon after a scan by the same object reuses it


@dataclass(frozen=True)
class Hit:
    """A search result: the memory and its BM25 score (higher is better)."""

    memory: Memory
    score: float


_list = list  # ``MemoryStore.list`` shadows the builtin inside the class body


def _new_op_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{_random.token_hex(3)}"


class MemoryStore:
    """The memories in one folder. Creates the folder and its index if missing."""

    def __init__(self, path: str | os.PathLike[str] = ".memory", config: Config | None = None):
        self.root = Path(path)
        self.config = config or Config(dir=self.root)
        if self.root.is_symlink():
            raise ConflictError(
                f"{self.root} is a symbolic link — point memdir at the real folder"
            )
        self.internal = self.root / INTERNAL
        self.internal.mkdir(parents=True, exist_ok=True)
        self._history = History(self.internal / "history", self.internal / LOG)
        gitignore = self.root / ".gitignore"
        if not gitignore.exists():
            write_atomic(gitignore, f"/{INTERNAL}/\n".encode())
        lock_path = str(self.internal / "lock")
        self._lock = filelock.FileLock(lock_path, timeout=self.config.lock_timeout)
        self._cache = idx.MetaCache(self.internal / "meta.json")
        self._scan = idx.Scan()
        self._fresh_at = 0.0
        self._search: SearchIndex | None = None
        self._verified: tuple[tuple[int, ...], dict[str, idx.Entry]] = ((), {})
        if (self.internal / JOURNAL).exists():
            with self.locked():
                self._recover()
        self.refresh()

    # -- locking and state ------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the writers' lock (re-entrant within one store object)."""
        try:
            with self._lock:
                yield
        except filelock.Timeout:
            raise StoreLocked(
                f"another memdir process has held {self.internal / 'lock'} for over"
                f" {self.config.lock_timeout:.0f}s — wait for it to finish or stop it"
            ) from None

    def refresh(self) -> idx.Scan:
        """Re-scan the folder (cheaply) and repair MEMORY.md if it no longer matches the files."""
        self._scan = self._do_scan()
        internal_temps = [n for n in os.listdir(self.internal) if n.startswith(TEMP_PREFIX)]
        if not self._index_verified() or self._scan.temp_files or internal_temps:
            with self.locked():
                self._scan = self._do_scan()
                self._remove_temp_files()
                self._write_index()
        self._fresh_at = time.monotonic()
        return self._scan

    def _ensure_fresh(self) -> None:
        """Refresh unless this object looked at the folder a moment ago (one open, one scan)."""
        if time.monotonic() - self._fresh_at > FRESH_SECONDS:
            self.refresh()

    def _index_verified(self) -> bool:
        """Whether MEMORY.md matches the current scan (skipping the render when nothing moved)."""
        try:
            st = os.stat(self.index_path)
        except FileNotFoundError:
            return False
        key = idx.stat_key(st)
        entries = self._scan.entries
        last_key, last_entries = self._verified
        if key == last_key and len(entries) == len(last_entries) and all(
            last_entries.get(name) is e for name, e in entries.items()
        ):
            return True
        if self._read_index() != idx.render(entries.values(), self.config.types):
            return False
        self._verified = (key, dict(entries))
        return True

    def _remove_temp_files(self) -> None:
        """Delete temporary files of crashed writers (only called holding the lock)."""
        for folder in (self.root, self.internal):
            for fname in os.listdir(folder):
                if fname.startswith(TEMP_PREFIX):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(folder / fname)
        self._scan.temp_files.clear()

    def _do_scan(self) -> idx.Scan:
        result = idx.scan(self.root, self._cache, self.config.types, self.config.max_file_bytes)
        self._cache.save()
        return result

    def _read_index(self) -> str | None:
        try:
            return self.index_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def _write_index(self) -> None:
        text = idx.render(self._scan.entries.values(), self.config.types)
        if self._read_index() != text:
            write_atomic(self.index_path, text.encode())
        self._verified = (idx.stat_key(os.stat(self.index_path)), dict(self._scan.entries))
        self._fresh_at = time.monotonic()

    def rebuild(self) -> dict[str, idx.Entry]:
        """Forget the metadata cache, re-parse every file and rewrite MEMORY.md if needed."""
        with self.locked():
            self._cache.files.clear()
            self._scan = self._do_scan()
            self._cache.save(force=True)
            self._write_index()
        return dict(self._scan.entries)

    @property
    def index_path(self) -> Path:
        """The path of MEMORY.md."""
        return self.root / idx.INDEX_FILE

    # -- reading ----------------------------------------------------------------------------

    def entries(self, type: str | None = None) -> list[idx.Entry]:
        """Metadata of every memory (no bodies), sorted by name."""
        self._ensure_fresh()
        items = sorted(self._scan.entries.values(), key=lambda e: e.name)
        return [e for e in items if type is None or e.type == type]

    def problems(self) -> list[idx.Problem]:
        """Files that are not valid memories, and rules that listed memories bend."""
        self._ensure_fresh()
        return list(self._scan.problems)

    def get(self, name: str) -> Memory:
        """The memory called ``name``; raise MemoryNotFound."""
        norm = memfmt.validate_name(name)
        entry = self._scan.entries.get(norm)
        files = [entry.file] if entry else []
        if norm + ".md" not in files:
            files.append(norm + ".md")
        for fname in files:
            try:
                mem = idx.read_memory(self.root / fname, self.config.max_file_bytes)
            except InvalidMemory:
                continue
            if mem.name == norm:
                return mem
        self.refresh()
        entry = self._scan.entries.get(norm)
        if entry is not None and entry.file not in files:
            return idx.read_memory(self.root / entry.file, self.config.max_file_bytes)
        raise MemoryNotFound(f"no memory named {norm!r} — see 'memdir list' for the names")

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._scan.entries

    def list(self, type: str | None = None) -> _list[Memory]:
        """Every memory, with its body, sorted by name."""
        out = []
        for e in self.entries(type):
            try:
                out.append(idx.read_memory(self.root / e.file, self.config.max_file_bytes))
            except InvalidMemory:
                continue  # changed under us since the scan; the next refresh reports it
        return out

    def search_index(self) -> SearchIndex:
        """The full-text index, brought up to date with the files (incrementally)."""
        from .search import Doc, SearchIndex

        self._ensure_fresh()
        if self._search is None:
            self._search = SearchIndex(self.internal / "search.sqlite")
        by_file = {e.file: e for e in self._scan.entries.values()}
        now_ns = time.time_ns()
        current: dict[str, str | None] = {}
        for f in by_file:
            key = self._scan.keys.get(f)
            # a file changed too recently to trust its identity is re-read next time too
            current[f] = (None if key is None or idx.racy(key[1], now_ns)
                          else f"{key[0]}:{key[1]}:{key[2]}")

        def load(files: _list[str]) -> _list[Doc]:
            docs = []
            for fname in files:
                try:
                    m = idx.read_memory(self.root / fname, self.config.max_file_bytes)
                except InvalidMemory:
                    continue  # changed since the scan; the next sync picks it up
                docs.append(Doc(fname, current[fname], m.name, m.description, m.body))
            return docs

        self._search.sync(current, load)
        return self._search

    def search_entries(self, query: str, k: int = 5) -> _list[tuple[idx.Entry, float]]:
        """The ``k`` best-matching memories' metadata with scores (no bodies read)."""
        by_file = {e.file: e for e in self._scan.entries.values()}
        hits = self.search_index().search(query, k)
        return [(by_file[f], score) for f, score in hits if f in by_file]

    def search(self, query: str, k: int = 5) -> _list[Hit]:
        """The ``k`` memories that best match ``query``, best first."""
        out = []
        for entry, score in self.search_entries(query, k):
            try:
                out.append(Hit(self._current(entry), score))
            except InvalidMemory:
                continue
        return out

    def __len__(self) -> int:
        return len(self._scan.entries)

    # -- writing ----------------------------------------------------------------------------

    def write(
        self,
        name: str,
        *,
        type: str,
        description: str,
        body: str = "",
        extra: dict[str, Any] | None = None,
        expect: str | None = None,
        reason: str = "",
        source: str = "api",
        secrets: str = "refuse",
    ) -> Memory:
        """Create or overwrite one memory; the previous version goes to history."""
        mem = Memory(name=name, type=type, description=description, body=body, extra=extra or {})
        self.apply([Put(mem, reason=reason, expect=expect)], source=source, secrets=secrets)
        return self.get(name)

    def delete(self, name: str, *, reason: str = "", source: str = "api") -> None:
        """Delete one memory; its last version stays in history."""
        self.apply([Remove(name, reason=reason)], source=source)

    def apply(
        self, plan: Sequence[Change], *, source: str = "api", summary: str = "",
        secrets: str = "refuse", undoes: str | None = None,
    ) -> Operation | None:
        """Apply a list of changes as one transaction; None when nothing changed.

        ``secrets`` says what to do with credentials in the text: "refuse" (raise SecretFound,
        the default), "redact" (automatic paths) or "allow" (the user insisted).
        """
        plan = screen(plan, secrets)
        with self.locked():
            self._scan = self._do_scan()
            steps = self._prepare(plan)
            if not steps:
                return None
            op = {"id": _new_op_id(), "time": memfmt.now(), "source": source,
                  "summary": summary, "steps": steps, "undoes": undoes}
            write_atomic(self.internal / JOURNAL, json.dumps(op, ensure_ascii=False).encode())
            return self._execute(op)

    def record(self, summary: str, *, source: str, undoes: str | None = None) -> Operation:
        """Log an operation that changed no file (so that undo can tell it was handled)."""
        with self.locked():
            op = Operation(_new_op_id(), memfmt.now(), source, summary, (), undoes)
            self._history.append_log(op)
        return op

    def _prepare(self, plan: Sequence[Change]) -> _list[dict[str, Any]]:
        """Validate a plan against the current files and turn it into journal steps."""
        seen: set[str] = set()
        steps: _list[dict[str, Any]] = []
        stamp = memfmt.now()
        for change in plan:
            raw = change.memory.name if isinstance(change, Put) else change.name
            name = memfmt.validate_name(raw)
            if name in seen:
                raise PlanError(f"the plan changes {name!r} twice — combine those changes")
            seen.add(name)
            entry = self._scan.entries.get(name)
            current = self._current(entry) if entry else None
            if change.expect is not None and (current is None or current.digest != change.expect):
                raise ConflictError(
                    f"memory {name!r} changed on disk since it was read — reload it and retry"
                )
            if isinstance(change, Remove):
                if entry is None:
                    raise MemoryNotFound(f"no memory named {name!r} — see 'memdir list'")
                steps.append({"name": name, "file": entry.file, "action": "delete",
                              "content": None, "reason": change.reason})
                continue
            new = memfmt.validate_new(change.memory.replace(name=name), self.config.types)
            if current is not None and change.merge_extra:
                new = new.replace(extra={**current.extra, **new.extra})
            if current is not None:
                unchanged = new.replace(created=current.created, updated=current.updated)
                if memfmt.dumps(unchanged) == memfmt.dumps(current):
                    continue
            created = (current.created if current else None) or new.created or stamp
            new = new.replace(created=created, updated=stamp)
            fname = entry.file if entry else memfmt.filename_for(name)
            if entry is None and (self.root / fname).exists():
                raise ConflictError(
                    f"{fname} exists but is not a valid memory"
                    " — fix or move it (see 'memdir doctor')"
                )
            steps.append({"name": name, "file": fname,
                          "action": "update" if entry else "create",
                          "content": memfmt.dumps(new), "reason": change.reason})
        return steps

    def _current(self, entry: idx.Entry) -> Memory:
        return idx.read_memory(self.root / entry.file, self.config.max_file_bytes)

    def _note_written(self, steps: _list[dict[str, Any]]) -> None:
        """Update the scan with files this process just wrote, without re-scanning the folder."""
        now_ns = time.time_ns()
        for step in steps:
            mem = memfmt.loads(step["content"])
            entry = idx.entry_from(mem, step["file"], self.config.types)
            self._scan.entries[mem.name] = entry
            st = os.stat(self.root / step["file"], follow_symlinks=False)
            if not idx.racy(st.st_mtime_ns, now_ns):
                self._cache.remember(step["file"], idx.stat_key(st), entry, None)
        self._cache.save()

    def _execute(self, op: dict[str, Any], *, incremental: bool = True) -> Operation:
        """Carry out a journaled operation; safe to run again after a crash at any point."""
        changes = []
        for step in op["steps"]:
            path = self.root / step["file"]
            before = None
            # A create's file can only exist here if this operation wrote it before a crash.
            if step["action"] != "create" and path.is_file() and not path.is_symlink():
                before = self._history.archive(step["name"], path, step["action"],
                                               step["reason"], op["id"])
            if step["content"] is None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            else:
                write_atomic(path, step["content"].encode())
            changes.append({"name": step["name"], "action": step["action"],
                            "before": before, "reason": step["reason"]})
        fsync_dir(self.root)
        record = Operation(op["id"], op["time"], op["source"], op.get("summary", ""),
                           tuple(changes), op.get("undoes"))
        self._history.append_log(record)
        if incremental and all(step["content"] is not None for step in op["steps"]):
            self._note_written(op["steps"])
        else:  # deletes can uncover a duplicate, and a recovery knows nothing: look again
            self._scan = self._do_scan()
        self._write_index()
        os.unlink(self.internal / JOURNAL)
        if self._search is not None:  # keep an open search index in step, incrementally
            self.search_index()
        return record

    def _recover(self) -> None:
        """Finish an operation a crashed process left in the journal."""
        path = self.internal / JOURNAL
        try:
            op = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return  # its writer finished while we waited for the lock
        except (OSError, ValueError):
            # The journal is written atomically, so this is not ours to interpret: keep it aside.
            os.replace(path, self.internal / f"journal.unreadable.{_new_op_id()}")
            return
        self._scan = self._do_scan()
        self._execute(op, incremental=False)

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

    def restore(self, name: str, version: int | None = None, *, source: str = "api") -> Memory:
        """Bring back a history version (the latest by default); the current one is kept too."""
        versions = self.history(name)
        if not versions:
            raise MemoryNotFound(f"memory {name!r} has no history — nothing to restore")
        number = versions[-1].version if version is None else version
        mem = memfmt.loads(self.version_text(name, number))
        if mem.name != memfmt.validate_name(name):
            mem = mem.replace(name=memfmt.validate_name(name))
        # The user's own earlier text: restored as it was, even if it held a credential.
        self.apply([Put(mem, reason=f"restore version {number}", merge_extra=False)],
                   source=source, summary=f"restore {name} to version {number}",
                   secrets="allow")
        return self.get(name)

