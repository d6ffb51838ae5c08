"""What is in a store folder: scanning the memory files, the metadata cache, and ``MEMORY.md``.

A scan lists every ``*.md`` file, stats it, and re-parses only files whose identity (size,
mtime, inode) changed since the cached scan. It reports files that are not valid memories
instead of failing. ``render`` turns the entries into the text of ``MEMORY.md``.
This module does NOT write memories, take the store lock or keep history.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from . import memory as memfmt
from .atomic import TEMP_PREFIX
from .errors import InvalidMemory

INDEX_FILE = "MEMORY.md"

CACHE_VERSION = 3
RACY_FINE_NS = 50_000_000  # files touched this recently are not cached (mtime granularity)
RACY_COARSE_NS = 2_000_000_000


@dataclass(frozen=True)
class Entry:
    """A memory's metadata as the index and the catalogue need it; no body."""

    name: str
    type: str
    description: str
    created: str | None
    updated: str | None
    pinned: bool
    file: str
    warnings: tuple[str, ...] = ()

    @cached_property
    def index_line(self) -> str:
        """This memory's line in MEMORY.md (computed once per entry object)."""
        return f"- [{self.name}]({self.file}) — {_one_line(self.description)} ({self.type})"

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON-able data."""
        return {"name": self.name, "type": self.type, "description": self.description,
                "created": self.created, "updated": self.updated, "pinned": self.pinned,
                "file": self.file, "warnings": list(self.warnings)}


@dataclass(frozen=True)
class Problem:
    """A file in the store that is not a usable memory, or a memory that bends a rule."""

    file: str
    reason: str
    severity: str = "error"  # "error": not listed; "warning": listed but bends a rule


@dataclass
class Scan:
    """The state of the folder at one moment."""

    entries: dict[str, Entry] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    temp_files: list[str] = field(default_factory=list)  # left by writers that crashed
    keys: dict[str, tuple[int, ...]] = field(default_factory=dict)  # file -> stat_key


def entry_from(mem: memfmt.Memory, file: str, types: tuple[str, ...]) -> Entry:
    return Entry(
        name=mem.name,
        type=mem.type,
        description=mem.description,
        created=mem.created,
        updated=mem.updated,
        pinned=mem.pinned,
        file=file,
        warnings=tuple(memfmt.check(mem, types)),
    )


def read_memory(path: Path, max_bytes: int) -> memfmt.Memory:
    """Read and parse one memory file without following symlinks; raise InvalidMemory."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise InvalidMemory(f"cannot read the file ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InvalidMemory(f"larger than the {max_bytes // 1024} KiB limit")
    if b"\x00" in data:
        raise InvalidMemory("the file is binary (contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidMemory("not UTF-8 text") from None
    mem = memfmt.loads(text)
    return mem.replace(path=path.name, digest=memfmt.digest_of(data))


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
        self.files: dict[str, tuple[tuple[int, ...], Entry | None, str | None]] = {}
        self.pending: list[list[Any]] = []
        self.log_rows = 0
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("version") == CACHE_VERSION:
                for row in data["rows"]:
                    self._load_row(row)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self.files = {}
        try:
            with open(self.log_path, encoding="utf-8") as fh:
                for line in fh:
                    self.log_rows += 1
                    try:
                        self._load_row(json.loads(line))
                    except (ValueError, TypeError, KeyError, IndexError):
                        continue  # a torn line
        except OSError:
            pass

    def _load_row(self, row: list[Any]) -> None:
        fname = row[0]
        if len(row) == 1:
            self.files.pop(fname, None)
        elif len(row) == 5:
            self.files[fname] = (tuple(row[1:4]), None, row[4])
        else:
            entry = Entry(row[4], row[5], row[6], row[7], row[8], row[9], fname, tuple(row[10]))
            self.files[fname] = (tuple(row[1:4]), entry, None)

    @staticmethod
    def _row(fname: str, key: tuple[int, ...], entry: Entry | None, error: str | None
             ) -> list[Any]:
        if entry is None:
            return [fname, *key, error]
        return [fname, *key, entry.name, entry.type, entry.description, entry.created,
                entry.updated, entry.pinned, list(entry.warnings)]

    def save(self, *, force: bool = False) -> None:
        """Persist what changed; losing a race with another process only costs re-parsing."""
        if not self.pending and not force:
            return
        try:
            if force or self.log_rows + len(self.pending) > max(100, len(self.files) // 10):
                self._write_snapshot()
            else:
                lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.pending)
                with open(self.log_path, "a", encoding="utf-8") as fh:
                    fh.write(lines)
                self.log_rows += len(self.pending)
        except OSError:
            return  # a read-only store still works, only slower
        self.pending.clear()

    def _write_snapshot(self) -> None:
        rows = [self._row(f, *rec) for f, rec in self.files.items()]
        data = json.dumps({"version": CACHE_VERSION, "rows": rows}, ensure_ascii=False)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".meta-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(data)
            os.replace(tmp, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.log_path)
        self.log_rows = 0

    def remember(self, file: str, key: tuple[int, ...], entry: Entry | None,
                 error: str | None) -> None:
        """Record what a file with this identity parsed to."""
        self.files[file] = (key, entry, error)
        self.pending.append(self._row(file, key, entry, error))

    def forget(self, file: str) -> None:
        """Drop a file that no longer exists."""
        del self.files[file]
        self.pending.append([file])


def stat_key(st: os.stat_result) -> tuple[int, ...]:
    """A file's identity for the cache: size, modification time and inode."""
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def racy(mtime_ns: int, now_ns: int) -> bool:
    """Whether a file changed so recently that a same-size edit could keep its mtime.

    Timestamps with sub-millisecond digits come from a fine-grained filesystem, where a short
    window suffices; coarse ones (FAT, HFS+, some network mounts) need seconds.
    """
    window = RACY_COARSE_NS if mtime_ns % 1_000_000 == 0 else RACY_FINE_NS
    return now_ns - mtime_ns < window


def scan(root: Path, cache: MetaCache, types: tuple[str, ...], max_bytes: int) -> Scan:
    """List the memories in ``root``, re-parsing only files that changed since the cache.

    This runs on every command and every write, so the common path (a cached, unchanged file)
    is one ``lstat`` and a tuple comparison.
    """
    result = Scan()
    entries = result.entries
    now_ns = time.time_ns()
    files = cache.files
    seen: set[str] = set()
    duplicates: list[Entry] = []
    with os.scandir(root) as it:
        for de in it:
            fname = de.name
            if fname[0] == "." or not fname.endswith(".md") or fname == INDEX_FILE:
                if fname.startswith(TEMP_PREFIX):
                    result.temp_files.append(fname)
                continue
            st = de.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                if stat.S_ISLNK(st.st_mode):
                    result.problems.append(Problem(fname, "symbolic link, not followed"))
                continue
            seen.add(fname)
            key = (st.st_size, st.st_mtime_ns, st.st_ino)
            cached = files.get(fname)
            entry: Entry | None
            error: str | None
            if cached is not None and cached[0] == key:
                _, entry, error = cached
            else:
                entry, error = _parse(root / fname, max_bytes, types)
                if not racy(st.st_mtime_ns, now_ns):
                    cache.remember(fname, key, entry, error)
            if entry is None:
                result.problems.append(Problem(fname, error or "unreadable"))
                continue
            result.keys[fname] = key
            if entry.name in entries:
                duplicates.append(entry)
            else:
                entries[entry.name] = entry
    if len(seen) != len(files):
        for fname in [f for f in files if f not in seen]:
            cache.forget(fname)
    for dup in duplicates:
        # The file named after the memory wins; the others are reported, never touched.
        first = entries[dup.name]
        if dup.file == dup.name + ".md" or (first.file != first.name + ".md"
                                            and dup.file < first.file):
            entries[dup.name], dup = dup, first
        winner = entries[dup.name].file
        result.problems.append(
            Problem(dup.file, f"duplicate name {dup.name!r} (also in {winner}); not listed"))
    for entry in entries.values():
        if entry.warnings:
            result.problems.extend(Problem(entry.file, w, "warning") for w in entry.warnings)
    result.problems.sort(key=lambda p: (p.file, p.reason))
    return result


def _parse(path: Path, max_bytes: int, types: tuple[str, ...]) -> tuple[Entry | None, str | None]:
    try:
        mem = read_memory(path, max_bytes)
    except InvalidMemory as exc:
        return None, str(exc)
    return entry_from(mem, path.name, types), None


def _one_line(text: str) -> str:
    if text.isprintable() and "  " not in text:
        return text  # the common case, cheaply
    return " ".join(text.split())


def group_order(entries: Iterable[Entry], types: tuple[str, ...]) -> list[tuple[str, list[Entry]]]:
    """Entries grouped by type: configured types first, in their order, then the others."""
    groups: dict[str, list[Entry]] = {}
    for e in entries:
        groups.setdefault(e.type, []).append(e)
    ordered = [t for t in types if t in groups] + sorted(t for t in groups if t not in types)
    return [(t, sorted(groups[t], key=lambda e: e.name)) for t in ordered]


def render(entries: Iterable[Entry], types: tuple[str, ...]) -> str:
    """The text of MEMORY.md for these entries: one line per memory, grouped by type."""
    lines = [
        "# Memory index",
        "",
        "<!-- Generated by memdir from the memory files in this folder."
        " Edit those files, not this one. -->",
    ]
    groups = group_order(entries, types)
    if not groups:
        lines += ["", "_No memories yet._"]
    for type_, items in groups:
        lines += ["", f"## {type_}", ""]
        lines += [e.index_line for e in items]
    return "\n".join(lines) + "\n"
