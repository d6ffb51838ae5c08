"""Scopes: the project's store, the user's own store, and shared read-only stores, read as one.

- ``project``: the nearest ``.memory`` upward (as today): facts about this repository.
- ``user``: ``$MEMDIR_USER_DIR`` (``user_dir`` in config.toml), else the platform's user data
  folder (``~/.local/share/memdir`` on Linux): preferences and habits that follow the person
  into every project. Created with owner-only permissions, and only when first written.
- ``shared:<folder>``: each of ``read_only = [...]`` in config.toml and ``--also DIR``: recalled
  from, never written, never consolidated (a team's checked-in conventions). Not even caches
  are written there: they live in the user's cache folder (``~/.cache/memdir/shared``).

Each is an ordinary ``Store`` with its own MEMORY.md and caches. ``Scopes`` reads them as
one: a catalogue where each entry is tagged with its scope, and one search whose BM25 scores
share one corpus's statistics (and whose cosines come from one embedder: ``embed.from_config``
shares one per model in a process), so scores compare
across stores. A name held by two scopes: the project's wins; the other is listed as
``user:name`` (or ``shared:team:name``) when its content differs, and not at all when it is the
same. Writes go where the kind of memory belongs (``route``): ``user_preference`` to the user,
the rest to the project. Nothing from the user store is ever written into a project folder.
This module does NOT choose memories (``recall`` does) or talk to a model.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from .config import Config, folder
from .disk.layout import state_dir
from .entry import Entry, Hit
from .errors import (
    ConfigError,
    ConflictError,
    MemoryNotFound,
    ReadOnlyStore,
    StoreNotFound,
)
from .gate.provenance import HAND, Origin
from .memory import Memory
from .plan import Put
from .store import MemoryStore, Store, open_store, readable
from .store.base import carrying

if TYPE_CHECKING:
    from .find.embed import Embedder

log = logging.getLogger("memdir")
PROJECT, USER = "project", "user"
USER_TYPES = frozenset({"user_preference"})  # kinds about the person, not the repository

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _serial(method: Callable[Concatenate[Scopes, _P], _R]) -> Callable[Concatenate[Scopes, _P], _R]:
    """A reading method run by one thread at a time: a store's readers keep caches (the
    catalogue caught up, the search index) that two threads must not update at once."""

    def run(self: Scopes, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._reading:
            return method(self, *args, **kwargs)

    run.__name__, run.__doc__ = method.__name__, method.__doc__
    return run


def user_store_dir(config: Config) -> Path | None:
    """Where the user's store is (None when ``user_dir = "none"``). A link the user made for
    the folder itself (a dotfiles manager, another disk) is followed; links inside it never
    are."""
    if config.user_dir is not None:
        if str(config.user_dir).lower() == "none":
            return None
        root = config.user_dir
    else:
        root = folder("data")
    return root.resolve() if root.is_symlink() else root


def make_private(root: Path) -> None:
    """Make the user's store owner-only: the folder 0700, its memory files 0600 (a folder
    that existed before memdir used it may have been readable by everyone)."""
    try:
        if os.stat(root).st_mode & 0o077 == 0:
            return
        os.chmod(root, 0o700)
        for entry in os.scandir(root):
            if entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                os.chmod(entry.path, 0o600)
    except OSError as exc:
        log.warning(
            "memdir: cannot make the user store %s owner-only (%s) — run 'chmod -R go= %s'",
            root,
            exc.strerror,
            root,
        )


def route(config: Config, type: str, scope: str | None = None) -> str:
    """Where a memory of this kind is written: ``scope`` if given, else the user's store for
    kinds about the person (when there is a user store), else the project's."""
    if scope is not None and scope != "all":
        return scope
    return USER if type in USER_TYPES and user_store_dir(config) is not None else PROJECT


def open_user_store(
    root: Path, config: Config, *, watch: bool | None = False, embedder: Embedder | None = None
) -> Store:
    """The user's store at ``root``, created owner-only (0700) if it does not exist."""
    if not root.is_dir():
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
    make_private(root)
    return MemoryStore(
        root,
        dataclasses.replace(config.own, dir=root),  # the user's settings, never a project's
        create=True,
        watch=watch,
        embedder=embedder,
    )


def project_folder(config: Config) -> Path:
    """The folder relative paths in config.toml start from: the one holding the store."""
    return config.dir.absolute().parent


@dataclass
class Scope:
    """One store and what may be done with it."""

    name: str  # "project", "user", or "shared:<folder>"
    root: Path
    writable: bool
    store: Store | None  # None: not created yet (the user store before its first write)


def _shared_label(path: Path, taken: set[str]) -> str:
    folder = path.parent.name if path.name == ".memory" else path.name
    label, n = f"shared:{folder or 'store'}", 2
    while label in taken:
        label, n = f"shared:{folder}-{n}", n + 1
    return label


class Scopes:
    """The stores a project sees: project, user and shared ones, read as one."""

    def __init__(
        self,
        config: Config,
        *,
        project: Store | None = None,
        also: Sequence[str | os.PathLike[str]] = (),
        create: bool = False,
        watch: bool | None = None,
        scopes: Sequence[str] | None = None,
    ) -> None:
        """``project``: an open project store (else opened from ``config.dir``; created only
        with ``create``). ``also``: more read-only stores. ``scopes``: only these scope names
        (``project``, ``user``, ``shared``); default all."""
        self.config = config
        self.watch = watch
        self._reading = threading.RLock()  # shared by ``only``'s narrowed views
        wanted = set(scopes) if scopes is not None else {PROJECT, USER, "shared"}
        self._located: _View | None = None
        self.scopes: list[Scope] = []
        if PROJECT in wanted:
            if project is None:
                try:
                    project = open_store(config, create=create, watch=watch)
                except StoreNotFound:
                    project = None
            if project is not None:
                self.scopes.append(Scope(PROJECT, project.root, not project.read_only, project))
        user_root = user_store_dir(config)
        if USER in wanted and user_root is not None:
            store = None
            if state_dir(user_root).is_dir() or any(user_root.glob("*.md")):
                make_private(user_root)
                store = self._open(user_root, create=False)
            self.scopes.append(Scope(USER, user_root, True, store))
        if "shared" in wanted:
            base = project_folder(config)
            taken = {s.name for s in self.scopes}
            seen = {s.root.absolute() for s in self.scopes}
            for raw, given in [(r, False) for r in config.read_only] + [(a, True) for a in also]:
                path = Path(os.path.expanduser(str(raw)))
                # the path a project file's entry was checked at (links resolved) is opened
                path = Path(os.path.realpath(path if path.is_absolute() else base / path))
                if path.absolute() in seen:
                    continue
                if not path.is_dir():
                    if given:
                        raise ConfigError(
                            f"--also {raw}: {path} is not a folder — give the"
                            " path of a memory store"
                        )
                    # a teammate without that checkout still gets the rest
                    log.warning(
                        "memdir: read_only store %s (%s) is not a folder; skipped", raw, path
                    )
                    continue
                label = _shared_label(path, taken)
                taken.add(label)
                seen.add(path.absolute())
                self.scopes.append(Scope(label, path, False, self._open_shared(path)))

    @classmethod
    def of(cls, reader: Reader) -> Scopes:
        """``reader`` read as scopes: itself, or one store as a scope of one (the project's)."""
        if isinstance(reader, Scopes):
            return reader
        return cls(reader.config, project=reader, scopes=(PROJECT,))

    # -- the stores ---------------------------------------------------------------------------

    def _open(self, root: Path, *, create: bool) -> Store:
        """The user's own store: opened with the user's own settings, never a project's."""
        return MemoryStore(
            root, dataclasses.replace(self.config.own, dir=root), create=create, watch=self.watch
        )

    def _open_shared(self, root: Path) -> Store:
        """A shared store, read-only: its caches live in the user's cache folder, so nothing
        is ever written into it."""
        import hashlib

        key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
        caches = folder("cache") / "shared" / key
        return MemoryStore(
            root,
            dataclasses.replace(self.config, dir=root),
            create=False,
            watch=self.watch,
            cache_dir=caches,
        )

    def stores(self) -> list[tuple[Scope, Store]]:
        """The scopes that have a store, project first."""
        return [(s, s.store) for s in self.scopes if s.store is not None]

    def home(self) -> Store | None:
        """The first store written here (the project's, else the user's): where a read of
        several stores keeps its own notes (the recall log, the usage log, what each session
        was given); None when every store is read-only."""
        return next((st for _, st in self.stores() if not st.read_only), None)

    def scope(self, name: str) -> Scope:
        """The scope called ``name`` (``project``, ``user`` or ``shared:…``)."""
        for s in self.scopes:
            if s.name == name:
                return s
        known = ", ".join(s.name for s in self.scopes) or "none"
        raise StoreNotFound(f"no {name} store here (scopes: {known}) — see 'memdir scopes'")

    def writable(self, name: str) -> Store:
        """The store of a writable scope, created (owner-only for the user's) if need be."""
        s = self.scope(name)
        if not s.writable:
            raise ReadOnlyStore(f"{s.name} ({s.root}) is read-only — memdir never writes there")
        if s.store is None:
            s.store = open_user_store(s.root, self.config, watch=self.watch)
        return s.store

    def move(self, name: str, here: str, to: str, *, new: str | None = None, source: str) -> Path:
        """Move the memory ``name`` from scope ``here`` to scope ``to`` (its history stays
        where it was); the file it now lives in."""
        if here == to:
            raise ConflictError(f"{name} is already in the {to} store")
        origin, target = self.writable(here), self.writable(to)
        if (new or name) in target:
            raise ConflictError(
                f"the {to} store already has {new or name} — rename one first ('memdir mv')"
            )
        mem = origin.get(name)
        target.apply(
            [Put(mem.replace(name=new or name), reason=f"moved from the {here} store")],
            source=carrying(origin, mem, source),  # (a teammate's rule moved is still theirs)
            summary=f"moved {name} from {here}",
        )
        origin.delete(name, reason=f"moved to the {to} store", source=source)
        return target.root / f"{new or name}.md"

    def route(self, type: str, scope: str | None = None) -> str:
        """Where a new memory of this kind goes (see ``route``)."""
        return route(self.config, type, scope) if self.user_root() is not None or scope else PROJECT

    def only(self, name: str) -> Scopes:
        """These scopes narrowed to the one called ``name`` (the stores stay shared)."""
        narrowed = object.__new__(Scopes)
        narrowed.__dict__.update(self.__dict__)
        narrowed.scopes = [s for s in self.scopes if s.name == name]
        return narrowed

    def user_root(self) -> Path | None:
        """The user's store folder (None when there is no user scope)."""
        return next((s.root for s in self.scopes if s.name == USER), None)

    @property
    def project(self) -> Store | None:
        return next((s.store for s in self.scopes if s.name == PROJECT), None)

    @property
    def root(self) -> Path:
        """The project store's folder (what the agent's prompt names)."""
        return self.project.root if self.project is not None else self.config.dir

    def close(self) -> None:
        for _, store in self.stores():
            store.close()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold these stores for reading (re-entrant): the threads of one call (the memory
        model's choice and search's, in a hook) share one set of stores, one at a time."""
        with self._reading:
            yield

    # -- reading as one -----------------------------------------------------------------------

    @_serial
    def located(self) -> list[tuple[Scope, Entry, str]]:
        """Every memory of every scope as (scope, entry, shown name): project first; a name
        already shown is qualified with its scope when the content differs and left out when
        it is the same. Computed again only when a store's memories changed."""
        return self._view().located

    def _view(self) -> _View:
        key = tuple((s.name, st.version) for s, st in self.stores())
        if self._located is None or self._located.key != key:
            self._located = _View(key, self._locate())
        return self._located

    def _locate(self) -> list[tuple[Scope, Entry, str]]:
        shown: dict[str, tuple[Scope, Entry]] = {}
        out: list[tuple[Scope, Entry, str]] = []
        for scope, store in self.stores():
            for e in store.entries():
                first = shown.get(e.name)
                if first is None:
                    shown[e.name] = (scope, e)
                    out.append((scope, e, e.name))
                elif not self._same(first, (scope, e)):
                    out.append((scope, e, f"{scope.name}:{e.name}"))
        return out

    @staticmethod
    def _same(a: tuple[Scope, Entry], b: tuple[Scope, Entry]) -> bool:
        if (a[1].type, a[1].description) != (b[1].type, b[1].description):
            return False
        if a[0].store is None or b[0].store is None:
            return False
        one, other = readable(a[0].store, a[1].name), readable(b[0].store, b[1].name)
        return one is not None and other is not None and one.body == other.body

    @_serial
    def entries(self) -> list[Entry]:
        """The catalogue: every memory once, named as ``located`` shows it."""
        return list(self._view().entries)

    @_serial
    def locate(self, shown: str) -> tuple[Scope, str]:
        """The scope and real name of a memory as the catalogue shows it."""
        found = self._view().by_shown.get(shown)
        if found is not None:
            return found[0], found[1].name
        raise MemoryNotFound(f"no memory named {shown!r} — see 'memdir list'")

    def scope_of(self, shown: str) -> str:
        return self.locate(shown)[0].name

    @_serial
    def get(self, shown: str) -> Memory:
        """The memory the catalogue shows as ``shown`` (its ``name`` is the real one). An
        unknown name gets the project store's answer (an invalid name, or did-you-mean)."""
        try:
            scope, name = self.locate(shown)
        except LookupError:
            pairs = self.stores()
            if not pairs:
                raise
            return pairs[0][1].get(shown)
        assert scope.store is not None
        return scope.store.get(name)

    @_serial
    def origin(self, shown: str, digest: str | None = None) -> Origin:
        """Where the memory shown as ``shown`` came from: the writer its store's log names
        (a team's database store: ``mcp:alice``); a read-only store without a log of its own
        (a checked-in folder) is that store's (written by whoever writes it). ``digest``: of
        the text the caller just read (else it is read)."""
        scope, name = self.locate(shown)
        assert scope.store is not None
        origin = scope.store.origin(name, digest)
        if not scope.writable and origin.label == HAND:
            return Origin(scope.name)
        return origin

    @_serial
    def search(
        self, query: str, k: int = 5, *, explain: bool = False, meaning: bool = True
    ) -> list[Hit]:
        """The ``k`` best memories over every scope, with comparable scores, each with its
        scope and catalogue entry (named as the catalogue shows it; a same-content copy
        hidden by the project's is left out); by full text alone when not ``meaning``."""
        from .entry import to_hit
        from .find.asked import Asked
        from .find.ranking import rank_many

        pairs = self.stores()
        asked = Asked.of(query, k, self.config)
        ranking = rank_many(
            [store.index.ranker() for _, store in pairs],
            query,
            asked.ranked,
            explain=explain,
            dense=meaning,
        )
        for _, store in pairs:
            store.index.last = ranking
        by_file = self._view().by_file
        out = []
        for r in ranking.hits:
            i, key = r.key
            scope, store = pairs[i]
            entry = store.entry_at(key)
            found = None if entry is None else by_file.get((scope.name, entry.file))
            if found is not None:
                e, name = found
                shown = e if name == e.name else dataclasses.replace(e, name=name)
                out.append(to_hit(shown, r, lambda e: self.get(e.name), scope.name))
        return asked.weigh(out)

    @_serial
    def mentioned(self, terms: list[str]) -> set[str]:
        """Which of these full-text terms (``search.tokenize``'s) some memory of some scope
        holds, in its name, description or body."""
        known: set[str] = set()
        for _, store in self.stores():
            ranker = store.index.ranker()
            with ranker.held():
                known |= ranker.prepare(False).stats(terms)[0].keys()
        return known

    @_serial
    def ranking_note(self) -> str:
        pairs = self.stores()
        return pairs[0][1].index.describe() if pairs else "ranking: no stores"


class _View:
    """What ``located`` derived from the stores at given versions, with its lookups."""

    def __init__(
        self, key: tuple[tuple[str, int], ...], located: list[tuple[Scope, Entry, str]]
    ) -> None:
        self.key = key
        self.located = located
        self.by_shown = {shown: (sc, e) for sc, e, shown in located}
        self.by_file = {(sc.name, e.file): (e, shown) for sc, e, shown in located}
        self.entries = [
            e if shown == e.name else dataclasses.replace(e, name=shown) for _, e, shown in located
        ]


Reader = Store | Scopes  # one store, or several read as one (``Scopes.of``)
