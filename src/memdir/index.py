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
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import memory as memfmt
from .errors import InvalidMemory

INDEX_FILE = "MEMORY.md"
TEMP_PREFIX = ".tmp-"
CACHE_VERSION = 2
RACY_NS = 2_000_000_000  # files touched this recently are re-read next time (mtime granularity)


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

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON-able data."""
        data = asdict(self)
        data["warnings"] = list(self.warnings)
        return data


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


def _entry_from(mem: memfmt.Memory, file: str, types: tuple[str, ...]) -> Entry:
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
    """Parsed metadata keyed by file identity, kept in ``.memdir/meta.json`` (disposable)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.files: dict[str, dict[str, Any]] = {}
        self.dirty = False
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("version") == CACHE_VERSION:
                self.files = data["files"]
        except (OSError, ValueError, KeyError, AttributeError):
            self.dirty = True

    def save(self) -> None:
        """Write the cache atomically if it changed; losing a race only costs re-parsing."""
        if not self.dirty:
            return
        data = json.dumps({"version": CACHE_VERSION, "files": self.files}, ensure_ascii=False)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".meta-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(data)
            os.replace(tmp, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return
        self.dirty = False

    def remember(self, file: str, key: list[int], entry: Entry | None, error: str | None) -> None:
        """Record what a file with this identity parsed to."""
        record: dict[str, Any] = {"k": key}
        if entry is not None:
            record["m"] = entry.to_dict()
        else:
            record["e"] = error
        self.files[file] = record
        self.dirty = True


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def scan(root: Path, cache: MetaCache, types: tuple[str, ...], max_bytes: int) -> Scan:
    """List the memories in ``root``, re-parsing only files that changed since the cache."""
    result = Scan()
    seen: set[str] = set()
    racy_after = time.time_ns() - RACY_NS
    by_name: dict[str, list[Entry]] = {}
    with os.scandir(root) as it:
        for de in it:
            fname = de.name
            if fname.startswith(TEMP_PREFIX):
                result.temp_files.append(fname)
                continue
            if not fname.endswith(".md") or fname == INDEX_FILE or fname.startswith("."):
                continue
            if de.is_symlink():
                result.problems.append(Problem(fname, "symbolic link, not followed"))
                continue
            if not de.is_file(follow_symlinks=False):
                continue
            seen.add(fname)
            st = de.stat(follow_symlinks=False)
            key = _stat_key(st)
            cached = cache.files.get(fname)
            if cached is not None and cached["k"] == key:
                if "m" in cached:
                    m = cached["m"]
                    hit = Entry(**{**m, "warnings": tuple(m["warnings"])})
                    by_name.setdefault(hit.name, []).append(hit)
                else:
                    result.problems.append(Problem(fname, cached["e"]))
                continue
            entry: Entry | None
            error: str | None
            if st.st_size > max_bytes:
                entry, error = None, f"larger than the {max_bytes // 1024} KiB limit"
            else:
                try:
                    mem = read_memory(root / fname, max_bytes)
                    entry, error = _entry_from(mem, fname, types), None
                except InvalidMemory as exc:
                    entry, error = None, str(exc)
            if st.st_mtime_ns < racy_after:
                cache.remember(fname, key, entry, error)
            if entry is not None:
                by_name.setdefault(entry.name, []).append(entry)
            else:
                result.problems.append(Problem(fname, error or "unreadable"))
    for fname in [f for f in cache.files if f not in seen]:
        del cache.files[fname]
        cache.dirty = True
    for name, found in by_name.items():
        # The file named after the memory wins; the others are reported, never touched.
        found.sort(key=lambda e: (e.file != name + ".md", e.file))
        result.entries[name] = found[0]
        for dup in found[1:]:
            result.problems.append(
                Problem(dup.file, f"duplicate name {name!r} (also in {found[0].file}); not listed")
            )
        for warning in found[0].warnings:
            result.problems.append(Problem(found[0].file, warning, "warning"))
    result.problems.sort(key=lambda p: (p.file, p.reason))
    return result


def _one_line(text: str) -> str:
    return " ".join(text.split())


def group_order(entries: Iterable[Entry], types: tuple[str, ...]) -> list[tuple[str, list[Entry]]]:
    """Entries grouped by type: configured types first, in their order, then the others."""
    groups: dict[str, list[Entry]] = {}
    for e in entries:
        groups.setdefault(e.type, []).append(e)
    ordered = [t for t in types if t in groups] + sorted(t for t in groups if t not in types)
    return [(t, sorted(groups[t], key=lambda e: e.name)) for t in ordered]


def entry_line(e: Entry) -> str:
    """The index line of one memory: name, link, description and type."""
    return f"- [{e.name}]({e.file}) — {_one_line(e.description)} ({e.type})"


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
        lines += [entry_line(e) for e in items]
    return "\n".join(lines) + "\n"
