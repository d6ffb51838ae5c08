"""Applying a plan to a store's folder as one transaction: the journal, the files, history,
the log, MEMORY.md and the caches, safe to finish after a crash at any point.

``Store.apply`` holds the lock and calls ``prepare``, ``preflight`` and ``execute``;
``recover`` finishes what a crashed writer left in the journal. This module does NOT lock (the
store does) and does NOT screen secrets (``plan.screen`` does, before).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from ... import memfile
from ... import memory as memfmt
from ...disk.atomic import clear_intent, fsync_dir, intent_pending, write_atomic
from ...disk.layout import HISTORY, JOURNAL, JOURNALS, LOG
from ...disk.lock import not_a_link
from ...entry import Entry
from ...errors import ConflictError, InvalidMemory, MemdirError, MemoryNotFound, PlanError
from ...history import ChangeRecord, Journal, Operation, Step
from ...memory import Memory
from ...plan import Change, Put, Remove, check_memory, new_op_id, settle_put
from .folder import Folder

_list = list


def unfinished(internal: Path) -> list[str]:
    """The journals in ``internal`` that hold an operation not yet carried out (this
    version's, or the one earlier versions write)."""
    return [name for name in JOURNALS if intent_pending(internal / name)]


def _same_device(a: Path, b: Path) -> bool:
    try:
        return os.stat(a).st_dev == os.stat(b).st_dev
    except OSError:
        return False


class Transaction:
    """The write side of one store's folder (used holding the store's lock)."""

    def __init__(self, folder: Folder) -> None:
        self.root, self.internal, self.config = folder.root, folder.internal, folder.config
        self._history, self._folder = folder.history, folder
        # a file is staged in the state folder, so the store's watchers see one rename, where
        # both are on one file system; in the store's own folder otherwise
        self._stage = self.internal if _same_device(self.root, self.internal) else None
        self._catalog, self._tracker = folder.catalog, folder.tracker

    def check(self, memory: Memory) -> Memory:
        """Validate a memory as a write would (name, type, description, size) without
        writing; returns it normalised. Planners use this to drop one bad item, not a plan."""
        return check_memory(memory, self.config)

    def prepare(self, plan: Sequence[Change]) -> _list[Step]:
        """Validate a plan against the current files and turn it into journal steps."""
        seen: set[str] = set()
        steps: _list[Step] = []
        stamp = memfmt.now()
        entries = self._catalog.entries
        removed = {c.name for c in plan if isinstance(c, Remove)}
        for change in plan:
            raw = change.memory.name if isinstance(change, Put) else change.name
            name = memfmt.validate_name(raw)
            if name in seen:
                raise PlanError(f"the plan changes {name!r} twice — combine those changes")
            seen.add(name)
            entry = entries.get(name)
            current = self.current(entry) if entry else None
            if change.expect is not None and (current is None or current.digest != change.expect):
                raise ConflictError(
                    f"memory {name!r} changed on disk since it was read — reload it and retry"
                )
            if isinstance(change, Remove):
                if entry is None:
                    raise MemoryNotFound(f"no memory named {name!r} — see 'memdir list'")
                steps.append(
                    {
                        "name": name,
                        "file": entry.file,
                        "action": "delete",
                        "content": None,
                        "reason": change.reason,
                    }
                )
                continue
            new = settle_put(change, name, current, self.config, stamp)
            if new is None:
                continue
            fname = entry.file if entry else memfmt.filename_for(name)
            if entry is None and not (change.adopt and self.plain_note(fname)):
                self.check_new_name(name, fname, seen | removed)
            content = memfmt.dumps(new)
            steps.append(
                {
                    "name": name,
                    "file": fname,
                    "action": "update" if entry else "create",
                    "content": content,
                    "reason": change.reason,
                }
            )
        return steps

    def preflight(self, steps: _list[Step]) -> None:
        """Refuse, before the journal is written, an operation that could not finish: links
        planted where it would write history or the log."""
        not_a_link(self.internal / LOG, "file")
        not_a_link(self.internal / HISTORY, "folder")
        for step in steps:
            if step["action"] != "create":
                not_a_link(self._history.versions_dir(step["name"]), "folder")

    def plain_note(self, fname: str) -> bool:
        """Whether ``fname`` is a regular file without frontmatter (a note to adopt)."""
        try:
            text = memfile.read_file(self.root / fname, self.config.max_file_bytes)
        except InvalidMemory:
            return False
        return not text.lstrip(b"\xef\xbb\xbf").startswith(b"---")

    def check_new_name(self, name: str, fname: str, planned: set[str]) -> None:
        """A new memory's file must be free, and its name must not pass for another one's."""
        path = self.root / fname
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is not None:
            what = (
                "a symbolic link"
                if stat.S_ISLNK(st.st_mode)
                else "not a regular file"
                if not stat.S_ISREG(st.st_mode)
                else "not a valid memory"
            )
            raise ConflictError(
                f"{fname} exists but is {what} — fix or move it (see 'memdir doctor')"
            )
        twin = self._catalog.skeletons.get(memfmt.skeleton(name))
        if twin is not None and twin != name and twin not in planned:
            raise ConflictError(
                f"memory name {name!r} differs from the existing {twin!r} only in case or"
                f" look-alike characters — update {twin!r} or choose a distinct name"
            )

    def current(self, entry: Entry) -> Memory:
        return memfile.read_memory(self.root / entry.file, self.config.max_file_bytes)

    def log(self, op: Operation, *, again: bool = False) -> None:
        """Append ``op`` to the log with the folder's time, so other processes can tell
        memdir's own changes from hand edits (``again``: a recovery, which may have logged it)."""
        root_mtime = os.lstat(self.root).st_mtime_ns
        size = self._history.append_log(
            op, root_mtime=root_mtime, index=self._folder.index_record, again=again
        )
        if size is not None:
            self._tracker.acknowledge(size, root_mtime)

    def execute(
        self, op: Journal, *, incremental: bool = True, journal: str = JOURNAL
    ) -> Operation:
        """Carry out a journaled operation; safe to run again after a crash at any point
        (``journal``: the file it was read from, cleared when done)."""
        changes: _list[ChangeRecord] = []
        for step in op["steps"]:
            path = self.root / step["file"]
            before = None
            if step["action"] != "create":
                if path.is_file() and not path.is_symlink():
                    before = self._history.archive(
                        step["name"], path, step["action"], step["reason"], op["id"]
                    )
                else:  # gone already: this operation archived it before a crash
                    before = self._history.version_of(step["name"], op["id"])
            if step["content"] is None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            else:
                # (synced; its folder is synced once below, with MEMORY.md's rename)
                write_atomic(path, step["content"].encode(), stage=self._stage, sync_folder=False)
            written = (
                None if step["content"] is None else memfmt.digest_of(step["content"].encode())
            )
            changes.append(
                ChangeRecord(
                    name=step["name"],
                    file=step["file"],
                    action=step["action"],
                    before=before,
                    reason=step["reason"],
                    digest=written,
                )
            )
        record = Operation(
            op["id"],
            op["time"],
            op["source"],
            op.get("summary", ""),
            tuple(changes),
            op.get("undoes"),
        )
        if incremental:
            for step in op["steps"]:
                if step["content"] is None:
                    self._catalog.update([step["file"]])
                else:
                    self._catalog.note_written(
                        step["file"],
                        step["content"].encode(),
                        os.lstat(self.root / step["file"]),
                    )
        else:  # a recovery knows nothing about the folder: look at all of it
            self._tracker.mark()
            self._catalog.sweep()
        self._folder.write_index(stale=incremental, log=True)
        fsync_dir(self.root)  # the renames and unlinks durable: one folder sync per write
        self.log(record, again=not incremental)
        clear_intent(self.internal / journal)
        self._folder.save()  # the files' rows and documents, in one transaction
        return record

    def adopt(
        self,
        before: Mapping[str, bytes | None],
        *,
        source: str,
        summary: str,
        reason: str,
        others: Mapping[str, bytes] | None,
        authors: Mapping[str, str] | None = None,
    ) -> Operation | None:
        """Record what something other than memdir (a git merge) did to the folder (see
        ``Store.adopt``); called holding the lock."""
        op_id = new_op_id()
        changes: _list[ChangeRecord] = []
        kept_as_other: set[str] = set()  # conflicts whose other side is the text kept here
        for fname, old in sorted(before.items()):
            path = self.root / fname
            try:
                now = None if path.is_symlink() else path.read_bytes()
            except (FileNotFoundError, IsADirectoryError):
                now = None
            if now == old:
                continue
            name = _name_in(now, fname) or _name_in(old, fname)
            if name is None:
                continue
            action = "create" if old is None else "delete" if now is None else "update"
            why = reason
            if old is not None and (others or {}).get(name) == old:
                why = "the other side of a conflict"
                kept_as_other.add(name)
            kept = None if old is None else self._history.keep(name, old, action, why, op_id)
            record = ChangeRecord(
                name=name,
                file=fname,
                action=action,
                before=kept,
                reason=reason,
                digest=None if now is None else memfmt.digest_of(now),
            )
            if (authors or {}).get(fname):
                record["by"] = (authors or {})[fname]
            changes.append(record)
        for name, data in (others or {}).items():
            if name not in kept_as_other:  # not kept above already
                self._history.keep(
                    name, data, "update", "the other side of a conflict", op_id + "-"
                )
        # the files the merge changed, and any that appeared or went (no full sweep)
        self._folder.tracker.mark()
        self._folder.catalog.update(before)
        self._folder.catalog.names_changed()
        self._folder.save()
        self._folder.write_index()
        if not changes and not others:
            return None
        op = Operation(op_id, memfmt.now(), source, summary, tuple(changes), None)
        self.log(op, again=True)  # a sync run again after a crash adopts the same commit
        return op

    def recover(self) -> None:
        """Finish an operation a crashed process left in the journal."""
        for name in JOURNALS:
            self._recover(self.internal / name)

    def _recover(self, path: Path) -> None:
        if path.is_symlink():  # not ours: keep it aside, never follow it
            os.replace(path, self.internal / f"journal.unreadable.{new_op_id()}")
            return
        if not intent_pending(path):
            return  # its writer finished while we waited for the lock
        try:
            op = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError):
            # Torn before any step began (steps wait for it to be durable), or not ours to
            # interpret: kept aside either way.
            os.replace(path, self.internal / f"journal.unreadable.{new_op_id()}")
            return
        self.execute(op, incremental=False, journal=path.name)


def _name_in(data: bytes | None, fname: str) -> str | None:
    """The memory name a file's text gives (its file name's when the text says none)."""
    if data is not None:
        try:
            return memfmt.loads(data.decode("utf-8")).name
        except (UnicodeDecodeError, MemdirError):
            pass
    return memfmt.valid_name(fname.removesuffix(".md"))
