"""What is in a store folder: scanning the memory files, keeping the store's index in step,
and ``MEMORY.md``.

A scan lists every ``*.md`` file, stats it, and re-parses only files whose identity (size,
mtime, inode) changed since the store's index last saw them; what a file parsed to goes into
the index (``storeindex``: its row and its full-text document, together). It reports files
that are not valid memories instead of failing. ``entry.render`` makes the text of ``MEMORY.md``.
This module does NOT write memories, take the store lock or keep history.
"""

from __future__ import annotations

import bisect
import os
import stat
import time
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

from ... import memory as memfmt
from ...disk.atomic import TEMP_PREFIX
from ...entry import INDEX_FILE, INDEX_HEAD, Entry, Problem
from ...errors import InvalidMemory
from ...gate.safetext import for_markdown
from ...memfile import entry_from, parse, racy, read_file, stat_key
from .storeindex import Parsed, StoreIndex

WRITE_EVERY = 2_000  # parsed files a first sweep writes into the index at a time


def _odd_file_name(fname: str) -> str | None:
    """Why a file name cannot be listed as a memory (it would break the lines it appears on)."""
    if not fname.isprintable():
        return "the file name has control or invisible characters — rename the file"
    return None


class Catalog:
    """What the memory files of a folder say, kept up to date change by change.

    ``sweep`` looks at every file (one ``lstat`` each, re-parsing only files whose identity
    changed since the store's index saw them); ``update`` looks again at just the files named,
    which is how writes, the operation log and file-system events keep it current without a
    sweep. What was parsed is written into the index by ``save`` (rows and full-text
    documents in one transaction). ``entries`` maps each name to the file that wins it; names
    claimed by several files are reported by ``problems``. The type groups stay sorted, so
    ``render`` is a join.
    This class does NOT watch the folder or decide when to look: the store does.
    """

    def __init__(self, root: Path, db: StoreIndex, types: tuple[str, ...], max_bytes: int) -> None:
        self.root = root
        self.db = db
        self.types = types
        self.max_bytes = max_bytes
        self.state: dict[str, tuple[tuple[int, ...], Entry | None, str | None]] = {}
        self.odd: dict[str, str] = {}  # files that are not regular files, or badly named
        self.temp_files: list[str] = []
        self.claims: dict[str, list[str]] = {}
        self.entries: dict[str, Entry] = {}
        self.groups: dict[str, list[str]] = {}  # type -> sorted names
        self.recheck: set[str] = set()  # changed too recently for the identity to be trusted
        self.changed: set[str] = set()  # files changed since a consumer (search) last asked
        self.pending: dict[str, Parsed | None] = {}  # what ``save`` writes into the index
        self.own: set[str] = set()  # files memdir wrote (from any process) since ``save``
        self._skeletons: dict[str, str] | None = None  # look-alike key -> name, when asked
        self.version = 0  # bumped whenever the listed entries change
        self.names: list[str] = []  # listed names, sorted
        self.fingerprint = 0  # of every file's identity: equal fingerprints, equal MEMORY.md
        self._lines: dict[str, list[bytes]] = {}  # type -> its MEMORY.md lines, UTF-8
        self._chunks: dict[str, bytes] = {}  # type -> those lines, joined
        self._known: dict[str, tuple[tuple[int, ...] | None, Entry | None, str | None]] | None
        self._known = None  # the index's rows, read by the first sweep

    # -- looking at files -----------------------------------------------------------------

    def sweep(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Look at every file in the folder; parse the ones whose identity changed."""
        now_ns = time.time_ns()
        seen, odd, temps = scan(str(self.root))
        old = self.state
        if self._known is None:  # a first sweep: what the index says of each file
            self._known = self.db.rows()
        known = self._known
        todo = [
            f
            for f, key in seen.items()
            if (old.get(f) or known.get(f) or (None,))[0] != key or racy(key[1], now_ns)
        ]
        fresh = {}
        for i, fname in enumerate(todo):
            fresh[fname] = self._parse(fname, seen[fname], now_ns)
            if progress is not None:
                progress(i + 1, len(todo))
            if len(self.pending) >= WRITE_EVERY:
                self.save()  # (a first build: its bodies are not all held at once)
        state: dict[str, tuple[tuple[int, ...], Entry | None, str | None]] = {}
        for fname, key in seen.items():
            prev = old.get(fname)
            if fname in fresh:
                state[fname] = fresh[fname]
            elif prev is not None and prev[0] == key:
                state[fname] = prev
            else:
                state[fname] = (key, *known[fname][1:])
        for fname in (known.keys() | old.keys()) - seen.keys():
            self.pending[fname] = None
        self._known = {}  # (read once: later sweeps compare with what this one found)
        self.changed.update(f for f in old if f not in state)
        self.changed.update(f for f in state if old.get(f) != state[f])
        same = len(state) == len(old) and all(old.get(f) is v for f, v in state.items())
        self.state, self.odd, self.temp_files = state, odd, temps
        self.recheck &= state.keys()
        if not same:  # (nothing moved: names, winners and fingerprint are still right)
            self._rebuild()

    def start_over(self, db: StoreIndex) -> None:
        """Forget every file (the next sweep parses them all again), with a new index."""
        self.db = db
        self.state.clear()
        self.pending.clear()
        self._known = {}

    def save(self) -> dict[str, bytes]:
        """Write what was parsed since into the store's index (one transaction); the texts
        that files memdir did not write replaced (edited or deleted by hand, or by a program
        or a plain ``git pull``), by file."""
        own, self.own = self.own, set()
        if not self.pending:
            return {}
        pending, self.pending = self.pending, {}
        replaced = self.db.write(pending)
        return {f: text for f, text in replaced.items() if f not in own}

    def update(self, fnames: Iterable[str]) -> None:
        """Look again at these files only (created, changed, deleted or renamed)."""
        now_ns = time.time_ns()
        root = str(self.root)
        for fname in set(fnames):
            if not _is_memory_file(fname):
                continue
            try:
                st = os.lstat(os.path.join(root, fname))
            except (FileNotFoundError, NotADirectoryError):
                self._drop(fname)
                continue
            why = _classify(fname, st)
            if why is not None:
                self._drop(fname)
                self.odd[fname] = why
                continue
            self.odd.pop(fname, None)
            key = stat_key(st)
            old = self.state.get(fname)
            if old is not None and old[0] == key and fname not in self.recheck:
                continue
            self._replace(fname, self._parse(fname, key, now_ns))

    def names_changed(self) -> None:
        """Look at files that appeared or disappeared (a listing, no ``lstat`` of the rest)."""
        names = {f for f in os.listdir(self.root) if _is_memory_file(f)}
        known = self.state.keys() | self.odd.keys()
        self.update((names - known) | (known - names))

    def recheck_recent(self) -> None:
        """Re-read files that changed so recently that their identity could not be trusted."""
        if self.recheck:
            self.update(list(self.recheck))

    def _parse(
        self, fname: str, key: tuple[int, ...], now_ns: int
    ) -> tuple[tuple[int, ...], Entry | None, str | None]:
        mem: memfmt.Memory | None = None
        data: bytes | None = None
        try:
            data = read_file(os.path.join(self.root, fname), self.max_bytes)  # (no Path made)
            mem = parse(data, fname)
            entry: Entry | None = entry_from(mem, fname, self.types)
            error = None
        except InvalidMemory as exc:
            entry, error = None, str(exc)
        return self._noted(fname, key, entry, error, mem, data, now_ns)

    def _noted(
        self,
        fname: str,
        key: tuple[int, ...],
        entry: Entry | None,
        error: str | None,
        mem: memfmt.Memory | None,
        data: bytes | None,
        now_ns: int,
    ) -> tuple[tuple[int, ...], Entry | None, str | None]:
        """What a file holds, recorded for the index (without its identity while that is too
        recent to trust: every process reads the file again then)."""
        trusted = not racy(key[1], now_ns)
        if trusted:
            self.recheck.discard(fname)
        else:
            self.recheck.add(fname)
        self.pending[fname] = Parsed(key if trusted else None, entry, error, mem, data)
        return (key, entry, error)

    def note_written(self, fname: str, data: bytes, st: os.stat_result) -> None:
        """Record a file memdir itself just wrote (no need to read it back)."""
        self.odd.pop(fname, None)
        self.own.add(fname)
        key = stat_key(st)
        mem = parse(data, fname)
        entry = entry_from(mem, fname, self.types)
        rec = self._noted(fname, key, entry, None, mem, data, time.time_ns())
        self.recheck.discard(fname)  # what memdir wrote under the lock is known here
        self._replace(fname, rec)

    def _drop(self, fname: str) -> None:
        self.odd.pop(fname, None)
        self.recheck.discard(fname)
        if fname in self.state:
            self._replace(fname, None)
        self.pending[fname] = None

    # -- names and winners ----------------------------------------------------------------

    def _rebuild(self) -> None:
        """Recompute names, winners and groups from ``state`` in bulk (after a sweep)."""
        claims: dict[str, list[str]] = {}
        for fname, (_, entry, _) in self.state.items():
            if entry is not None:
                claims.setdefault(entry.name, []).append(fname)
        entries: dict[str, Entry] = {}
        for name, files in claims.items():
            own = name + ".md"
            winner = own if own in files else min(files)
            entries[name] = self.state[winner][1]  # type: ignore[assignment]
        self.claims, self.entries = claims, entries
        self.names = sorted(entries)
        self.groups = {}
        for name in self.names:
            self.groups.setdefault(entries[name].type, []).append(name)
        self._skeletons = None
        self._chunks, self._lines = {}, {}
        self.fingerprint = 0
        for fname, (key, _, _) in self.state.items():
            self.fingerprint ^= _file_hash(fname, key)
        self.version += 1

    def _replace(
        self, fname: str, new: tuple[tuple[int, ...], Entry | None, str | None] | None
    ) -> None:
        """Put what ``fname`` now holds (None: gone) in place of what it held, updating the
        claims, winners and fingerprint of just the names involved."""
        old = self.state.get(fname)
        if old == new:
            return
        if old is not None:
            self.fingerprint ^= _file_hash(fname, old[0])
        if new is None:
            del self.state[fname]
        else:
            self.state[fname] = new
            self.fingerprint ^= _file_hash(fname, new[0])
        self.changed.add(fname)
        old_name = old[1].name if old is not None and old[1] is not None else None
        new_name = new[1].name if new is not None and new[1] is not None else None
        if old_name is not None and old_name != new_name:
            files = self.claims.get(old_name, [])
            if fname in files:
                files.remove(fname)
            if not files:
                self.claims.pop(old_name, None)
            self._elect(old_name)
        if new_name is not None:
            files = self.claims.setdefault(new_name, [])
            if fname not in files:
                files.append(fname)
            self._elect(new_name)

    def _elect(self, name: str) -> None:
        """Choose the file that holds ``name``: the one named after it, else the first."""
        files = self.claims.get(name)
        if files and name in self.entries:
            own = name + ".md"
            entry = self.state[own if own in files else min(files)][1]
            same = self.entries[name]
            if entry is not None and (entry.type, entry.description, entry.file) == (
                same.type,
                same.description,
                same.file,
            ):
                self.entries[name] = entry  # same line in MEMORY.md, same group: no re-render
                return
        old = self.entries.pop(name, None)
        self.version += 1
        if old is not None:
            del self.names[bisect.bisect_left(self.names, name)]
            self._chunks.pop(old.type, None)
            group = self.groups[old.type]
            at = bisect.bisect_left(group, name)
            del group[at]
            if old.type in self._lines:
                del self._lines[old.type][at]
            if not group:
                del self.groups[old.type]
                self._lines.pop(old.type, None)
            if self._skeletons is not None and self._skeletons.get(memfmt.skeleton(name)) == name:
                del self._skeletons[memfmt.skeleton(name)]
        if not files:
            return
        own = name + ".md"
        winner = own if own in files else min(files)
        entry = self.state[winner][1]
        assert entry is not None
        self.entries[name] = entry
        bisect.insort(self.names, name)
        self._chunks.pop(entry.type, None)
        group = self.groups.setdefault(entry.type, [])
        at = bisect.bisect_left(group, name)
        group.insert(at, name)
        if entry.type in self._lines:
            self._lines[entry.type].insert(at, entry.index_line.encode())
        if self._skeletons is not None:
            self._skeletons.setdefault(memfmt.skeleton(name), name)

    @property
    def skeletons(self) -> dict[str, str]:
        """Listed names by their look-alike key (``memory.skeleton``)."""
        if self._skeletons is None:
            self._skeletons = {}
            for name in self.names:
                self._skeletons.setdefault(memfmt.skeleton(name), name)
        return self._skeletons

    # -- reports and rendering ------------------------------------------------------------

    def key_of(self, fname: str) -> tuple[int, ...] | None:
        """The identity of a listed file, or None while it is too recent to be trusted."""
        rec = self.state.get(fname)
        return None if rec is None or fname in self.recheck else rec[0]

    def problems(self) -> list[Problem]:
        """Files that are not usable memories, and memories that bend a rule."""
        out = [Problem(f, why) for f, why in self.odd.items()]
        for fname, (_, entry, error) in self.state.items():
            if entry is None:
                out.append(Problem(fname, error or "unreadable"))
        for name, files in self.claims.items():
            winner = self.entries[name].file
            out += [
                Problem(
                    f,
                    f"duplicate name {name!r} (also in {winner}); not listed — a copy (an"
                    " editor's, or a file-sync tool's conflicted copy): compare the two, keep"
                    f" what you want in {winner} and delete this one",
                )
                for f in files
                if f != winner
            ]
        for entry in self.entries.values():
            out += [Problem(entry.file, w, "warning") for w in entry.warnings]
        out.sort(key=lambda p: (p.file, p.reason))
        return out

    def render(self) -> list[bytes]:
        """MEMORY.md as UTF-8, in pieces written one after the other (each line is kept encoded
        and each type's lines joined, so a change re-joins only its own group's bytes)."""
        order = [t for t in self.types if t in self.groups]
        order += sorted(t for t in self.groups if t not in self.types)
        parts = [INDEX_HEAD.encode()]
        for t in order:
            chunk = self._chunks.get(t)
            if chunk is None:
                if t not in self._lines:
                    self._lines[t] = [self.entries[n].index_line.encode() for n in self.groups[t]]
                chunk = self._chunks[t] = b"\n".join(self._lines[t])
            parts += [f"\n\n## {for_markdown(t)}\n\n".encode(), chunk]
        if not order:
            parts.append(b"\n\n_No memories yet._")
        parts.append(b"\n")
        return parts


def scan(root: str) -> tuple[dict[str, tuple[int, ...]], dict[str, str], list[str]]:
    """A folder's memory files with their identities, the entries that cannot be memories and
    why, and crashed writers' temporary files: one listing and one ``lstat`` a file."""
    seen: dict[str, tuple[int, ...]] = {}
    odd: dict[str, str] = {}
    temps: list[str] = []
    with os.scandir(root) as it:
        for de in it:
            fname = de.name
            if not _is_memory_file(fname):
                if fname.startswith(TEMP_PREFIX):
                    temps.append(fname)
                continue
            try:
                st = de.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # deleted since the listing
            why = _classify(fname, st)
            if why is not None:
                odd[fname] = why
                continue
            seen[fname] = stat_key(st)
    return seen, odd, temps


def _file_hash(fname: str, key: tuple[int, ...]) -> int:
    """64 bits that change when a file's name or identity changes (XOR-ed into fingerprints)."""
    return zlib.crc32(f"{fname}\0{key}".encode()) | (key[1] & 0xFFFFFFFF) << 32


def _is_memory_file(fname: str) -> bool:
    return fname[:1] != "." and fname.endswith(".md") and fname != INDEX_FILE


def _classify(fname: str, st: os.stat_result) -> str | None:
    """Why this directory entry is not a file memdir reads, or None if it is."""
    if stat.S_ISLNK(st.st_mode):
        return "symbolic link, not followed"
    if not stat.S_ISREG(st.st_mode):
        kind = (
            "a folder"
            if stat.S_ISDIR(st.st_mode)
            else "a named pipe"
            if stat.S_ISFIFO(st.st_mode)
            else "a special file"
        )
        return f"{kind}, not a regular file — move it out of the store"
    return _odd_file_name(fname)
