"""History and the operation log of a store.

Every overwritten or deleted memory is kept as a numbered version in
``<state>/history/<name>/NNNN.md`` with a ``NNNN.json`` sidecar (when, which action, why, and
the operation that did it). Every applied plan is one line of ``<state>/log.jsonl``.
This module does NOT lock or decide anything: the store calls it holding its lock.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from . import memory as memfmt
from .disk.atomic import TEMP_PREFIX, append_nofollow, write_atomic
from .disk.statefile import read_json, read_lines
from .errors import ConflictError, MemoryNotFound


@dataclass(frozen=True)
class Version:
    """One stored earlier version of a memory."""

    name: str
    version: int
    time: str
    action: str
    reason: str
    op: str

    def to_dict(self) -> dict[str, object]:
        """The version as JSON-able data."""
        return dict(self.__dict__)


class ChangeRecord(TypedDict):
    """One memory an operation changed, as the log keeps it."""

    name: str
    file: str
    action: str  # "create", "update" or "delete"
    before: int | None  # the history version it replaced (None for a create)
    reason: str
    digest: NotRequired[str | None]  # of the file it wrote (None: it deleted); older logs lack it
    by: NotRequired[str]  # who made the change elsewhere (a sync: the commit's author)


class Step(TypedDict):
    """One change of an operation, as the journal keeps it before it is carried out."""

    name: str
    file: str
    action: str
    content: str | None  # the new file text; None for a delete
    reason: str


class Journal(TypedDict):
    """An operation in flight (``<state>/intent.json``)."""

    id: str
    time: str
    source: str
    summary: str
    steps: list[Step]
    undoes: str | None


@dataclass(frozen=True)
class Operation:
    """One applied plan, as recorded in the log."""

    id: str
    time: str
    source: str
    summary: str
    changes: tuple[ChangeRecord, ...]
    undoes: str | None = None

    def to_dict(self) -> dict[str, object]:
        """The operation as JSON-able data."""
        data = dict(self.__dict__)
        data["changes"] = list(self.changes)
        return data


class History:
    """The history folder and the log file of one store."""

    def __init__(self, root: Path, log_path: Path) -> None:
        self.root = root
        self.log_path = log_path

    def versions_dir(self, name: str) -> Path:
        return self.root / memfmt.validate_name(name)

    def _ready_dir(self, name: str) -> Path:
        """The versions folder of ``name``, created; links planted there are refused."""
        for path in (self.root, self.versions_dir(name)):
            if path.is_symlink():
                raise ConflictError(
                    f"{path} is a symbolic link — memdir keeps history only inside the store;"
                    " remove the link (see 'memdir doctor')"
                )
            path.mkdir(exist_ok=True)
        return self.versions_dir(name)

    def archive(self, name: str, path: Path, action: str, reason: str, op_id: str) -> int:
        """Keep the current file of ``name`` as a new history version (once per operation)."""
        return self.keep(name, path.read_bytes(), action, reason, op_id)

    def keep(self, name: str, data: bytes, action: str, reason: str, op_id: str) -> int:
        """Keep ``data`` as a new history version of ``name`` (once per operation)."""
        vdir = self._ready_dir(name)
        for fname in os.listdir(vdir):  # a crashed writer's leftovers (we hold the lock)
            if fname.startswith(TEMP_PREFIX):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(vdir / fname)
        versions = self.versions(name)
        if versions and versions[-1].op == op_id:
            return versions[-1].version  # archived before a crash; the file may be new already
        number = versions[-1].version + 1 if versions else 1
        write_atomic(vdir / f"{number:04d}.md", data)
        meta = {
            "version": number,
            "time": memfmt.now(),
            "action": action,
            "reason": reason,
            "op": op_id,
        }
        write_atomic(vdir / f"{number:04d}.json", json.dumps(meta, ensure_ascii=False).encode())
        return number

    def put(self, version: Version, data: bytes) -> None:
        """Keep ``data`` as ``version`` exactly (number, time, action…): a store's history
        brought in from another store."""
        vdir = self._ready_dir(version.name)
        write_atomic(vdir / f"{version.version:04d}.md", data)
        meta = {k: v for k, v in version.to_dict().items() if k != "name"}
        write_atomic(
            vdir / f"{version.version:04d}.json", json.dumps(meta, ensure_ascii=False).encode()
        )

    def version_of(self, name: str, op_id: str) -> int | None:
        """The version that operation ``op_id`` archived, if it archived one."""
        found = [v.version for v in self.versions(name) if v.op == op_id]
        return found[-1] if found else None

    def versions(self, name: str) -> list[Version]:
        """Earlier versions of ``name``, oldest first (also for deleted memories)."""
        vdir = self.versions_dir(name)
        out = []
        real_dir = vdir.is_dir() and not vdir.is_symlink()
        for meta_path in sorted(vdir.glob("*.json")) if real_dir else []:
            meta = read_json(meta_path)
            if not meta:
                continue
            out.append(
                Version(
                    name,
                    int(meta["version"]),
                    meta["time"],
                    meta["action"],
                    meta.get("reason", ""),
                    meta.get("op", ""),
                )
            )
        out.sort(key=lambda v: v.version)
        return out

    def purge(self, name: str, version: int | None = None) -> int:
        """Delete every kept version of ``name`` (or one) for good; how many went."""
        vdir = self.versions_dir(name)
        if vdir.is_symlink() or not vdir.is_dir():
            return 0
        gone = 0
        for v in self.versions(name):
            if version is None or v.version == version:
                for suffix in (".md", ".json"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(vdir / f"{v.version:04d}{suffix}")
                gone += 1
        if version is None:
            with contextlib.suppress(OSError):
                os.rmdir(vdir)
        return gone

    def text(self, name: str, version: int) -> str:
        """The file text of one history version; raise MemoryNotFound."""
        path = self.versions_dir(name) / f"{version:04d}.md"
        if (
            not path.with_suffix(".json").exists()
            or not path.exists()
            or path.is_symlink()
            or self.versions_dir(name).is_symlink()
        ):
            raise MemoryNotFound(
                f"memory {name!r} has no version {version} — see 'memdir history {name}'"
            )
        return path.read_text(encoding="utf-8")

    def append_log(
        self,
        op: Operation,
        *,
        root_mtime: int | None = None,
        index: Any = None,
        again: bool = False,
    ) -> int | None:
        """Append ``op`` (with the store folder's time after it) to the log; the log's new
        size, or None if the operation was logged before a crash (looked for only when
        ``again``: a recovery may run an operation twice, a new one has a new id)."""
        if self.log_path.is_symlink():
            raise ConflictError(
                f"{self.log_path} is a symbolic link — memdir writes its log only inside the"
                " store; remove the link (see 'memdir doctor')"
            )
        if again and any(o.id == op.id for o in self.log(limit=5)):
            return None
        data = op.to_dict()
        if root_mtime is not None:
            data["root_mtime"] = root_mtime
        if index:
            data["index"] = index
        line = json.dumps(data, ensure_ascii=False) + "\n"
        append_nofollow(self.log_path, line.encode(), sync=True)
        return os.lstat(self.log_path).st_size

    def records(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The log's lines as data, oldest first (the last ``limit`` of them)."""
        return [] if self.log_path.is_symlink() else read_lines(self.log_path, limit)

    def log(self, limit: int | None = None) -> list[Operation]:
        """Applied operations, oldest first (the last ``limit`` of them)."""
        out = []
        for d in self.records(limit):
            try:
                out.append(
                    Operation(
                        d["id"],
                        d["time"],
                        d["source"],
                        d.get("summary", ""),
                        tuple(d["changes"]),
                        d.get("undoes"),
                    )
                )
            except (KeyError, TypeError):
                continue
        return out
