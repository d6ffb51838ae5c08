"""The store contract: ``Store``, what recall, scopes, the hosts, the UI and the CLI call on a
store, and ``StoreBase``, the operations every backend does alike on top of its own few.

A backend (``files.MemoryStore``, ``pg.PgStore``) implements the primitives — reading the
catalogue and a memory, ``apply`` (one crash-safe transaction), history, the log — and its
``Index``, the ranking side apart from storage (the ranker, how it ranks, how vectors are
paced) — and inherits the rest from ``StoreBase``: writing, deleting, pinning, restoring
and searching are the same rules on every backend. What only one backend can do (a folder's
``adopt`` of a git merge) is not part of the contract; callers that need it take that backend.
``tests/test_store_contract.py`` runs one set of tests against every backend.
This module does NOT keep memories anywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

from .. import memory as memfmt
from ..config import Config
from ..entry import Entry, Hit, Problem
from ..errors import ConflictError, InvalidMemory, MemdirError, MemoryNotFound
from ..gate.provenance import UNKNOWN, Origin, label_of
from ..history import Operation, Version
from ..memory import Memory
from ..plan import Change, Put, Remove, check_memory

if TYPE_CHECKING:
    from ..find.ranking import Ranker, Ranking

_list = list  # ``Store.list`` shadows the builtin inside the class bodies
# A memory as ``take`` brings it in: its name, its file text (None: only history), its history.
Taken = tuple[str, str | None, Sequence[tuple[Version, str]]]


def checked_items(
    items: Sequence[Taken], config: Config
) -> _list[tuple[str, Memory | None, str | None, Sequence[tuple[Version, str]]]]:
    """``take``'s items parsed and checked as a write would check them (every backend): the
    name, the memory its text holds (None: only history), the text, the history."""
    out = []
    for name, text, versions in items:
        norm = memfmt.validate_name(name)
        mem = None if text is None else memfmt.loads(text)
        if mem is not None:
            if mem.name != norm:
                raise InvalidMemory(f"the text given for {norm!r} names {mem.name!r}")
            check_memory(mem, config)
        out.append((norm, mem, text, versions))
    return out


@runtime_checkable
class Index(Protocol):
    """A store's ranking side, apart from its storage: the ranker search uses, how it ranks
    now, and how the memories' vectors are made (paced within a search, all at once, or left
    for the store's worker). One per store object; every backend's passes the contract test."""

    backlog: int  # memories the last search left without a vector (ranked by BM25 alone)
    last: Ranking | None  # how the last search with it ranked (set by the searcher)

    def ranker(self) -> Ranker:
        """What ``ranking.rank_many`` ranks with, caught up with the memories."""
        ...

    def describe(self) -> str:
        """One line: how searches rank now (BM25 alone and why, or hybrid with which model)."""
        ...

    def pace(
        self, progress: Callable[[int, int], None] | None = None, budget: float | None = None
    ) -> None:
        """How searches embed memories without a vector: ``progress(done, total)`` after each
        batch; with ``budget``, at most that many seconds a search (the rest by BM25 until
        later), and nothing handed to the background (the caller does that)."""
        ...

    def embed_all(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Embed every memory without a vector now (``memdir index``, the worker), however
        long it takes; how many memories have one (0: no embedder)."""
        ...


class _Reads(Protocol):
    def get(self, name: str, /) -> Memory: ...
    def origin(self, name: str, digest: str | None = None, /) -> Origin: ...


def readable(reader: _Reads, name: str) -> Memory | None:
    """The memory ``name`` of a store (or of several read as one: ``scopes``), or None when
    it is gone or cannot be read (its file went meanwhile, a hand edit broke it)."""
    try:
        return reader.get(name)
    except (MemdirError, LookupError):
        return None


def origin_of(reader: _Reads, name: str, digest: str | None = None) -> Origin:
    """Where the memory ``name`` came from (``origin``); an origin that cannot be read (the
    memory gone or unreadable, its store's log unreadable) is nobody's: ``UNKNOWN``."""
    try:
        return reader.origin(name, digest)
    except (MemdirError, LookupError, OSError):
        return Origin(UNKNOWN)


@runtime_checkable
class Store(Protocol):
    """One store of memories, wherever it keeps them.

    Errors are the same from every backend: MemoryNotFound (with a did-you-mean), InvalidName,
    InvalidMemory, SecretFound, ConflictError (a stale ``expect``, a taken name), PlanError,
    StoreNotFound, ReadOnlyStore, StoreLocked."""

    root: Path  # this host's folder for the store (the memories' own, or a state folder)
    internal: Path  # memdir's own files under ``root`` (review queue, recall log, cursors)
    config: Config
    read_only: bool

    # -- reading
    def entries(self, type: str | None = None) -> _list[Entry]: ...
    def get(self, name: str) -> Memory: ...
    def list(self, type: str | None = None) -> _list[Memory]: ...
    def text(self, name: str) -> str: ...
    def __contains__(self, name: object) -> bool: ...
    def __len__(self) -> int: ...
    @property
    def version(self) -> int: ...
    def problems(self) -> _list[Problem]: ...
    def retired(self) -> _list[str]: ...
    def origin(self, name: str, digest: str | None = None) -> Origin: ...
    @property
    def location(self) -> str: ...
    def where_kept(self) -> str: ...
    def place_of(self, name: str) -> Path | str:
        """Where the memory ``name`` is kept: its file (a Path), or where the store is."""
        ...

    @property
    def index_path(self) -> Path: ...
    @property
    def watching(self) -> bool: ...

    # -- ranking
    @property
    def index(self) -> Index:
        """The store's ranking side (``Index``): what search ranks with, kept up to date."""
        ...

    def entry_at(self, key: str) -> Entry | None: ...
    def search(
        self, query: str, k: int = 5, *, explain: bool = False, dense: bool = True
    ) -> _list[Hit]: ...

    # -- changing
    def locked(self) -> AbstractContextManager[None]: ...
    def apply(
        self,
        plan: Sequence[Change],
        *,
        source: str = "api",
        summary: str = "",
        secrets: str = "refuse",
        undoes: str | None = None,
    ) -> Operation | None: ...
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
    ) -> Memory: ...
    def delete(self, name: str, *, reason: str = "", source: str = "api") -> None: ...
    def purge(self, name: str, version: int | None = None, *, source: str = "api") -> int: ...
    def rename(self, old: str, new: str, *, source: str = "api") -> Memory: ...
    def set_pinned(self, name: str, pinned: bool, *, source: str = "api") -> bool: ...
    def restore(self, name: str, version: int | None = None, *, source: str = "api") -> Memory: ...
    def record(self, summary: str, *, source: str, undoes: str | None = None) -> Operation: ...
    def take(self, items: Sequence[Taken], *, source: str) -> Operation | None: ...
    def check(self, memory: Memory) -> Memory: ...

    # -- history and log
    def history(self, name: str) -> _list[Version]: ...
    def version_text(self, name: str, version: int) -> str: ...
    def log(self, limit: int | None = None) -> _list[Operation]: ...

    # -- the object itself
    def refresh(self) -> None: ...
    def rebuild(self) -> dict[str, Entry]: ...
    def reopen(self) -> Store: ...
    def close(self) -> None: ...
    def __enter__(self) -> Store: ...
    def __exit__(self, *exc: object) -> None: ...


class _Versions(Protocol):
    def history(self, name: str) -> _list[Version]: ...
    def version_text(self, name: str, version: int) -> str: ...


def restoring(store: _Versions, name: str, version: int | None = None) -> tuple[Put, str]:
    """The change that brings back a history version of ``name`` (the latest by default),
    and its summary; MemoryNotFound when there is none (``StoreBase.restore``, and a caller
    that queues it for review instead)."""
    versions = store.history(name)
    if not versions:
        raise MemoryNotFound(f"memory {name!r} has no history — nothing to restore")
    number = versions[-1].version if version is None else version
    mem = memfmt.loads(store.version_text(name, number))
    if mem.name != memfmt.validate_name(name):
        mem = mem.replace(name=memfmt.validate_name(name))
    put = Put(mem, reason=f"restore version {number}", merge_extra=False)
    return put, f"restore {name} to version {number}"


class _Told(_Versions, Protocol):
    internal: Path

    def get(self, name: str) -> Memory: ...
    def log(self, limit: int | None = None) -> _list[Operation]: ...
    def __contains__(self, name: object) -> bool: ...


def users_gave(store: _Told, name: str, text: Memory) -> bool:
    """Whether this machine's user gave ``text`` (its type, description and body) as
    ``name`` before: a version of it, now or in history, that the user wrote through memdir
    or accepted. Choosing a text (a restore, a resolve) does not make it the user's."""
    from ..gate.decisions import accepted

    mine = {
        ch.get("digest")
        for op in store.log()
        for ch in op.changes
        if ch["name"] == name and Origin(label_of(op.source, ch.get("by"))).users
    }
    want = (text.type, text.description, text.body)
    texts: list[tuple[str | None, Memory]] = []
    if name in store:
        now = store.get(name)
        texts.append((now.digest, now))
    for version in store.history(name):
        raw = store.version_text(name, version.version)
        try:
            texts.append((memfmt.digest_of(raw.encode("utf-8")), memfmt.loads(raw)))
        except MemdirError:
            continue  # (a version that is no memory was nobody's rule)
    return any(
        (digest in mine or (digest is not None and accepted(store.internal, name, digest)))
        and (mem.type, mem.description, mem.body) == want
        for digest, mem in texts
    )


RESTORED = "restore"  # the source of a restored text the user did not give before


class _Whose(Protocol):
    root: Path
    internal: Path

    def origin(self, name: str, digest: str | None = None) -> Origin: ...


def carrying(store: _Whose, current: Memory, source: str) -> str:
    """The source a change that carries ``current``'s text over as it is (a rename, a pin, a
    move to another scope) is logged with: the caller's when the text is the user's own (or
    the caller is no user), else whose the text is — renaming or pinning a teammate's rule
    does not make it the user's. A text held for review is refused (ConflictError): carried
    over, it would slip out of its hold unreviewed."""
    from ..gate.decisions import accepted, active

    if active(store.root, current.name, current.digest) is not None:
        raise ConflictError(
            f"{current.name} is held for review (it came from elsewhere): approve or reject it"
            " first ('memdir review')"
        )
    if not Origin(label_of(source)).users:
        return source
    origin = store.origin(current.name, current.digest)
    if origin.users or (
        current.digest is not None and accepted(store.internal, current.name, current.digest)
    ):
        return source
    return origin.label


class StoreBase:
    """The operations every backend does alike, written once over the ``Store`` primitives
    (``get``, ``apply``, ``history``, ``version_text``, ``index``, ``entry_at``)."""

    config: Config

    # the primitives each backend provides (``Store``); declared here for the type checker
    if TYPE_CHECKING:

        @property
        def index(self) -> Index: ...

        def get(self, name: str) -> Memory: ...
        def apply(
            self,
            plan: Sequence[Change],
            *,
            source: str = "api",
            summary: str = "",
            secrets: str = "refuse",
            undoes: str | None = None,
        ) -> Operation | None: ...
        def history(self, name: str) -> _list[Version]: ...
        def version_text(self, name: str, version: int) -> str: ...
        def entry_at(self, key: str) -> Entry | None: ...
        def close(self) -> None: ...
        def locked(self) -> AbstractContextManager[None]: ...
        def record(self, summary: str, *, source: str, undoes: str | None = None) -> Operation: ...
        def __contains__(self, name: object) -> bool: ...
        def log(self, limit: int | None = None) -> _list[Operation]: ...
        def origin(self, name: str, digest: str | None = None) -> Origin: ...

        root: Path
        internal: Path

    def _drop_versions(self, name: str, version: int | None) -> int:
        """Remove the kept versions of ``name`` (or only ``version``); how many went."""
        raise NotImplementedError

    def _carry_history(self, old: str, new: str) -> None:
        """Before a rename: check ``new`` is free to create, and move the history of ``old``
        to ``new`` (unless ``new`` has history of its own)."""
        raise NotImplementedError

    def check(self, memory: Memory) -> Memory:
        """Validate a memory as a write would (name, type, description, size) without
        writing; returns it normalised. Planners use this to drop one bad item, not a plan."""
        return check_memory(memory, self.config)

    def purge(self, name: str, version: int | None = None, *, source: str = "api") -> int:
        """Remove ``name`` for good: the memory and every kept version (or only ``version``),
        so that a secret that reached it is gone. How many versions went; MemoryNotFound
        when there was nothing to purge."""
        memfmt.validate_name(name)
        if version is None and name in self:
            self.delete(name, reason="purged", source=source)
        with self.locked():
            gone = self._drop_versions(name, version)
            if not gone:
                what = f"version {version} of {name!r}" if version else f"{name!r}"
                raise MemoryNotFound(f"no {what} to purge — see 'memdir history {name}'")
            self.record(f"purged {name}" + (f"@v{version}" if version else ""), source=source)
        return gone

    def rename(self, old: str, new: str, *, source: str = "api") -> Memory:
        """Give a memory a new name; its history moves with it (``history(new)`` lists the
        versions it had under the old name too)."""
        old, new = memfmt.validate_name(old), memfmt.validate_name(new)
        with self.locked():
            current = self.get(old)
            if new in self:
                raise ConflictError(
                    f"a memory named {new!r} exists — choose another name or remove it first"
                )
            by = carrying(self, current, source)
            self._carry_history(old, new)
            self.apply(
                [
                    Put(current.replace(name=new), reason=f"renamed from {old}", merge_extra=False),
                    Remove(old, reason=f"renamed to {new}", expect=current.digest),
                ],
                source=by,
                summary=f"rename {old} to {new}",
                secrets="allow",
            )
        return self.get(new)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        return self.get(mem.name)

    def delete(self, name: str, *, reason: str = "", source: str = "api") -> None:
        """Delete one memory; its last version stays in history."""
        self.apply([Remove(name, reason=reason)], source=source)

    def set_pinned(self, name: str, pinned: bool, *, source: str = "api") -> bool:
        """Pin (never consolidated or changed automatically) or unpin a memory; False when it
        already was."""
        current = self.get(name)
        if current.pinned == pinned:
            return False
        extra = {k: v for k, v in current.extra.items() if k != "pinned"}
        if pinned:
            extra["pinned"] = True
        self.apply(
            [
                Put(
                    current.replace(extra=extra),
                    expect=current.digest,
                    merge_extra=False,
                    reason="pinned" if pinned else "unpinned",
                )
            ],
            source=carrying(self, current, source),
            summary=f"{'pin' if pinned else 'unpin'} {current.name}",
            secrets="allow",
        )
        return True

    def restore(self, name: str, version: int | None = None, *, source: str = "api") -> Memory:
        """Bring back a history version (the latest by default); the current one is kept too.
        A text the user did not give before (a teammate's, a pull's) comes back as from
        ``restore``: it waits for the user to accept it, as it did before."""
        put, summary = restoring(self, name, version)
        if Origin(label_of(source)).users and not users_gave(self, name, put.memory):
            source = RESTORED
        # The user's own earlier text: restored as it was, even if it held a credential.
        self.apply([put], source=source, summary=summary, secrets="allow")
        return self.get(name)

    def search(
        self, query: str, k: int = 5, *, explain: bool = False, dense: bool = True
    ) -> _list[Hit]:
        """The ``k`` memories that best match ``query``, best first (``hit.memory`` reads the
        body): BM25 fused with embedding similarity when an embedder is configured
        (``memdir[embed]``) and ``dense``, else BM25. ``explain`` fills in each method's rank
        and score, ranking the dense side over every memory (slower)."""
        from ..entry import to_hit
        from ..find.asked import Asked
        from ..find.ranking import rank_many

        asked = Asked.of(query, k, self.config)
        out = []
        ranking = rank_many(
            [self.index.ranker()], query, asked.ranked, explain=explain, dense=dense
        )
        self.index.last = ranking
        for r in ranking.hits:
            entry = self.entry_at(r.key[1])
            if entry is not None:
                out.append(to_hit(entry, r, self._read_entry))
        return asked.weigh(out)

    def _read_entry(self, entry: Entry) -> Memory:
        return self.get(entry.name)
