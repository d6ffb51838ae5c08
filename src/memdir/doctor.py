"""``memdir doctor``: a health report of a store, and the repairs that are always safe.

It reports files that are not valid memories (with the reason), memories that bend a rule,
leftover temporary files and an unfinished journal. With ``fix`` it rebuilds the
index and caches and removes stale temporary files. It does NOT modify or delete memory files.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import memory as memfmt
from . import wings
from .disk.atomic import TEMP_PREFIX, write_atomic
from .disk.layout import ADOPTED, HISTORY, INDEX_DB, INTERNAL
from .errors import MemdirError
from .gate.safetext import plural
from .memory import Memory, safe_repr
from .store import Store, origin_of, readable
from .store.files.transaction import unfinished

STALE_TEMP_SECONDS = 3600


@dataclass
class Report:
    """What doctor found and did."""

    memories: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """The report as JSON-able data."""
        return dict(self.__dict__)

    def lines(self) -> list[str]:
        """The report as lines for a person."""
        out = [plural(self.memories, "memory", "memories") + "."]
        out += [f"error: {e['file']}: {e['reason']}" for e in self.errors]
        out += [f"warning: {w['file']}: {w['reason']}" for w in self.warnings]
        out += [f"fixed: {f}" for f in self.fixed]
        out += self.notes
        if not self.errors and not self.warnings:
            out.append("No problems found.")
        elif self.errors:
            out.append("Files with errors are not listed; fix or move them by hand.")
        return out


def _where(store: Store, path: str | os.PathLike[str]) -> str:
    """A path as a report shows it: inside the store relative to it, else whole (memdir's
    state folder is outside the store)."""
    rel = os.path.relpath(path, store.root)
    return str(path) if rel.startswith("..") else rel


def _left_in_folder(store: Store, report: Report) -> None:
    """A ``.memdir`` in the store's folder is not memdir's state (that is kept outside it):
    one that came with the repository, or a file; memdir never reads it."""
    legacy = store.root / INTERNAL
    if store.internal != legacy and os.path.lexists(legacy):
        report.warnings.append(
            {
                "file": INTERNAL,
                "reason": "not memdir's state (kept in"
                f" {store.internal}); it came from elsewhere, such as the repository, and is"
                " never read — remove it ('git rm -r --cached .memdir' if git tracks it)",
            }
        )


def _internal_links(store: Store) -> list[str]:
    """Symbolic links inside the state folder (two levels: its files and history/<name>)."""
    found = []
    for folder in (store.internal, store.internal / HISTORY):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for de in entries:
            if de.is_symlink():
                found.append(_where(store, de.path))
            elif folder != store.internal and de.is_dir(follow_symlinks=False):
                found += [
                    _where(store, sub.path) for sub in os.scandir(de.path) if sub.is_symlink()
                ]
    return found


def _temp_files(store: Store) -> list[str]:
    """Leftovers of killed writers: in the store, in its state folder and in every history
    folder."""
    folders = [store.root, store.internal]
    with contextlib.suppress(OSError):
        folders += [
            Path(de.path)
            for de in os.scandir(store.internal / HISTORY)
            if de.is_dir(follow_symlinks=False)
        ]
    out = []
    for folder in folders:
        with contextlib.suppress(OSError):
            out += [
                de.path
                for de in os.scandir(folder)
                if de.name.startswith((TEMP_PREFIX, ".meta-")) and de.is_file(follow_symlinks=False)
            ]
    return out


def _damaged_caches(store: Store) -> list[tuple[str, str]]:
    """The SQLite caches whose pages SQLite finds damaged, with what it said."""
    import sqlite3

    found = []
    for name in (INDEX_DB,):
        path = store.internal / name
        if not path.is_file() or path.is_symlink():
            continue
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
            try:
                verdict = db.execute("PRAGMA quick_check").fetchone()[0]
            finally:
                db.close()
        except sqlite3.DatabaseError as exc:
            verdict = str(exc)
        if verdict != "ok":
            found.append((name, str(verdict).splitlines()[0][:120]))
    return found


def adopt(store: Store, fname: str) -> Memory:
    """Make a Markdown note dropped into the folder without frontmatter a memory, by the rule
    every bare note follows (``notes.from_text``): its file name is the name, its words give
    the type, its first line the description; its text stays, as the body. The note's bytes
    are kept (``<state>/adopted/``): undoing the adoption puts the file back as it was."""
    from .memfile import read_file
    from .memory import validate_name
    from .notes import from_text
    from .plan import Put

    name = validate_name(fname[:-3])
    text = read_file(store.root / fname, store.config.max_file_bytes).decode(
        "utf-8", errors="replace"
    )
    if text.lstrip("\ufeff").startswith("---"):
        raise MemdirError(f"{fname} has frontmatter already — fix it by hand")
    mem = from_text(name, text, store.config.types)
    kept = store.internal / ADOPTED
    kept.mkdir(exist_ok=True)
    write_atomic(kept / fname, read_file(store.root / fname, store.config.max_file_bytes))
    store.apply(
        [Put(mem, reason="a note without frontmatter, adopted", adopt=True)],
        source="doctor",
        summary=f"adopted {fname}",
    )
    return store.get(name)


_PLAIN_VALUE = re.compile(r"^(name|type|description):[ \t]+(?![\"'|>\[{])(.*: .*)$")


def _quoted(text: str) -> str | None:
    """``text`` with the one-line frontmatter values that hold ': ' quoted (a hand-written
    ``description: Note: …``), if that makes it a valid memory; else None."""
    if not text.startswith("---\n"):
        return None
    head, sep, rest = text[4:].partition("\n---")
    if not sep:
        return None
    lines = [
        _PLAIN_VALUE.sub(lambda m: f"{m.group(1)}: {json.dumps(m.group(2).rstrip())}", line)
        for line in head.split("\n")
    ]
    fixed = "---\n" + "\n".join(lines) + sep + rest
    if fixed == text:
        return None
    try:
        memfmt.loads(fixed)
    except MemdirError:
        return None
    return fixed


def _quotable(store: Store, fname: str) -> bool:
    try:
        return _quoted((store.root / fname).read_text(encoding="utf-8")) is not None
    except (OSError, UnicodeDecodeError):
        return False


def _quote(store: Store, fname: str) -> None:
    """Quote the values YAML misread, keeping the file as it was in ``<state>/adopted/``."""
    with store.locked():
        raw = (store.root / fname).read_bytes()
        fixed = _quoted(raw.decode("utf-8"))
        if fixed is None:
            return
        kept = store.internal / ADOPTED
        kept.mkdir(exist_ok=True)
        write_atomic(kept / fname, raw)
        write_atomic(store.root / fname, fixed.encode("utf-8"))
    store.record(f"doctor: quoted a value holding ': ' in {fname}", source="doctor")
    store.refresh()


def _empty(store: Store, fname: str) -> bool:
    """Whether a file holds nothing but white space (never a memory, never adopted)."""
    try:
        return not (store.root / fname).read_bytes().strip()
    except OSError:
        return False


def _misnamed(store: Store) -> list[dict[str, str]]:
    """Memories whose ``name:`` is not their file's name (renamed by hand on one side)."""
    out = []
    for entry in store.entries():
        if entry.file[:-3] != entry.name:
            out.append(
                {
                    "file": safe_repr(entry.file)[1:-1],
                    "reason": f"its name is {entry.name!r}, not the file's — rename the file"
                    f" to {entry.name}.md, or run 'memdir mv {entry.name} {entry.file[:-3]}'",
                }
            )
    return out


def _adoptable(store: Store, fname: str) -> bool:
    """Whether a file without frontmatter can become a memory as it is: its name is one."""
    from .memory import valid_name

    return valid_name(fname[:-3]) is not None and fname.endswith(".md") and not store.read_only


def diagnose(store: Store, *, fix: bool = False) -> Report:
    """Check ``store``; with ``fix`` also repair the index, caches and temporary files."""
    report = Report()
    links = _internal_links(store)
    for link in links:
        report.errors.append(
            {
                "file": link,
                "reason": "symbolic link inside memdir's state folder — memdir"
                " never writes through it; remove it (memdir recreates the file)",
            }
        )
    now = time.time()
    temps = _temp_files(store)
    stale = [p for p in temps if now - os.lstat(p).st_mtime > STALE_TEMP_SECONDS]
    damaged = _damaged_caches(store)
    if fix and not links:
        store.rebuild()  # (the store's index too: thrown away and built from the files)
        for path in stale:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            report.fixed.append(f"removed stale temporary file {_where(store, path)}")
        report.fixed.append("rebuilt MEMORY.md and the store's index")
    elif temps:
        report.warnings.append(
            {
                "file": ".",
                "reason": f"{len(temps)} temporary files of"
                f" interrupted writers ({len(stale)} older than an hour:"
                " 'memdir doctor --fix' removes those)",
            }
        )
    for name, why in damaged:
        if fix and not links:
            report.fixed.append(
                f"removed the damaged cache {store.internal / name} (rebuilt from the files)"
            )
        else:
            report.warnings.append(
                {
                    "file": str(store.internal / name),
                    "reason": f"damaged cache ({why}) — 'memdir doctor --fix' rebuilds it",
                }
            )
    for name in unfinished(store.internal):
        report.errors.append(
            {
                "file": str(store.internal / name),
                "reason": "an unfinished operation (reopen the store to finish it)",
            }
        )
    for leftover in sorted(store.internal.glob("journal.unreadable.*")):
        report.warnings.append(
            {
                "file": str(leftover),
                "reason": "an unreadable journal kept aside; inspect it, then delete it",
            }
        )
    _left_in_folder(store, report)
    if store.read_only:
        report.warnings.append(
            {"file": ".", "reason": "the store is read-only: memdir reads it but cannot change it"}
        )
    _file_problems(store, report, fix)
    wings.event("doctor", store, report, fix)  # (git: memdir's merge drivers, the last sync)
    _held(store, report)
    _outdated(store, report)
    report.warnings += _misnamed(store)
    report.memories = len(store.entries())
    return report


def _file_problems(store: Store, report: Report, fix: bool) -> None:
    """Each file that is not a usable memory: repaired where doctor can (a bare note adopted,
    a misread colon quoted), else said with its fix."""
    for p in store.problems():
        if p.reason.startswith("bad YAML in frontmatter") and _quotable(store, p.file):
            if fix:
                _quote(store, p.file)
                report.fixed.append(
                    f"{p.file}: quoted a value holding ': ' (YAML read it as a mapping); the"
                    f" file as it was is in {store.internal / ADOPTED}/"
                )
            else:
                report.warnings.append(
                    {
                        "file": safe_repr(p.file)[1:-1],
                        "reason": f"{p.reason} — a value holds ': ' unquoted; 'memdir doctor"
                        " --fix' quotes it",
                    }
                )
            continue
        if p.reason.startswith("no YAML frontmatter") and _empty(store, p.file):
            report.warnings.append(
                {"file": safe_repr(p.file)[1:-1], "reason": "an empty file — delete it"}
            )
            continue
        if p.reason.startswith("no YAML frontmatter") and _adoptable(store, p.file):
            if fix:
                try:
                    mem = adopt(store, p.file)
                except MemdirError as exc:
                    report.errors.append({"file": safe_repr(p.file)[1:-1], "reason": str(exc)})
                    continue
                report.fixed.append(
                    f"{p.file}: a note without frontmatter is now the memory"
                    f" {mem.name} ({mem.type}: {mem.description})"
                )
                continue
            report.warnings.append(
                {
                    "file": safe_repr(p.file)[1:-1],
                    "reason": "a note without"
                    " frontmatter, not listed yet — 'memdir doctor --fix' makes"
                    " it a memory (its name, its first line as description)",
                }
            )
            continue
        target = report.errors if p.severity == "error" else report.warnings
        target.append({"file": safe_repr(p.file)[1:-1], "reason": p.reason})


def _held(store: Store, report: Report) -> None:
    """What waits for the person before any model sees it: held memories, a config.toml a
    sync brought."""
    from .gate.decisions import active, holds
    from .gate.trust import pulled

    for name, h in sorted(holds(store.root).items()):
        mem = readable(store, name)
        if mem is not None and active(store.root, name, mem.digest) is not None:
            report.warnings.append(
                {
                    "file": f"{name}.md",
                    "reason": f"held for review, not recalled: {h.why} — 'memdir review'",
                }
            )
    for name, why, label in _planted(store):
        report.warnings.append(
            {
                "file": f"{name}.md",
                "reason": f"reads as an instruction planted for an agent ({why}; from: {label}):"
                f" no model is shown it — look at it ('memdir show {name}'), then edit or"
                f" remove it ('memdir rm {name}')",
            }
        )
    for name, label, when in _gone_outside(store):
        report.notes.append(
            f"note: {name}, a rule you gave, was deleted outside memdir ({label}, {when}) —"
            f" 'memdir restore {name}' brings it back"
        )
    if pulled(store.root / "config.toml"):
        report.warnings.append(
            {
                "file": "config.toml",
                "reason": "brought by a sync and not accepted: its settings are ignored"
                f" — look at it, then 'memdir trust {store.root}'",
            }
        )


def _outdated(store: Store, report: Report) -> None:
    """The memories whose files or symbols in the project's working tree are gone or changed
    since they were written (``anchors``): recall and session start mark them."""
    from .code.anchors import outdated, project_of

    project = project_of(store.root)
    if project is None:
        return
    for mem in store.list():
        why = outdated(f"{mem.description}\n{mem.body}", mem.updated, project)
        if why is not None:
            report.notes.append(
                f"{mem.name}: {why} — check it ('memdir show {mem.name}'), then edit it or"
                f" 'memdir rm {mem.name}'"
            )


GONE_DAYS = 30  # how long doctor mentions a rule of the user's deleted outside memdir


def _gone_outside(store: Store) -> list[tuple[str, str, str]]:
    """The user's own rules that a change memdir did not make (a plain ``git pull``, a
    teammate's sync, a hand) deleted in the last ``GONE_DAYS`` days and nobody brought back:
    name, whose change it was, when."""
    from datetime import UTC, datetime, timedelta

    from .config import standing_kind
    from .gate.provenance import Origin, label_of

    last: dict[str, tuple[str, Origin, str, bool]] = {}  # action, origin, time, users' before
    for op in store.log():
        for ch in op.changes:
            prev = last.get(ch["name"])
            origin = Origin(label_of(op.source, ch.get("by")))
            last[ch["name"]] = (ch["action"], origin, op.time, prev is not None and prev[1].users)
    since = (datetime.now(UTC) - timedelta(days=GONE_DAYS)).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = []
    names = {e.name for e in store.entries()}
    for name, (action, origin, when, users_before) in sorted(last.items()):
        if action != "delete" or origin.users or not users_before or when < since:
            continue
        versions = [] if name in names else store.history(name)
        if not versions:
            continue
        try:
            mem = memfmt.loads(store.version_text(name, versions[-1].version))
        except MemdirError:
            continue
        if standing_kind(mem.type, mem.pinned):
            out.append((name, origin.label, when))
    return out


def _planted(store: Store) -> list[tuple[str, str, str]]:
    """The memories a door brought (not the user's own words) whose text orders the agent
    about, as the gate finds them (``policy``): no model is shown them."""
    from .gate.instructions import screen
    from .policy import PLANTED, Policy

    gate = Policy(store)
    out = []
    for e in store.entries():
        mem = readable(store, e.name)
        if mem is not None and gate.verdict(e.name, mem).why == PLANTED:
            origin = origin_of(store, e.name, mem.digest)
            out.append((e.name, screen(f"{mem.description}\n{mem.body}") or "", origin.label))
    return out
