"""Finding memories in a store: the full-text index and, when an embedder is configured, the
vectors, both kept in step with the catalogue and fused into one ranking.

Both indexes are caches under ``<state>/`` (in memory for a read-only store), brought up to
date incrementally: a sync compares just the files the catalogue saw change since the last
one, and reads only those whose identity changed. An embedder that fails (an endpoint down)
does not fail a search: ranking falls back to BM25 and ``dense_error`` says why. A query in
Chinese, Japanese or Korean is ranked by BM25 alone when the embedder is English-only.

This module does NOT write memories and does NOT decide which embedder to use
(``embed.from_config`` does).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from . import index as idx
from . import memfile
from .background import cache_count, embed_in_background, indexed, indexer_at_work
from .cachedb import damaged
from .config import Config
from .entry import Entry, Hit
from .errors import InvalidMemory, MemdirError
from .layout import EMBED_DOWN, EMBEDDING_LOCK, SEARCH, VECTORS
from .memory import Memory
from .metacache import CACHE_VERSION

if TYPE_CHECKING:
    from .catalogtext import CatalogText
    from .embed import Embedder, Vectors
    from .search import SearchIndex
    from .vectors import Dense, Ranked, VectorIndex

log = logging.getLogger("memdir")


LIBRARY_EMBED_BUDGET = 0.5  # seconds a library search embeds (commands set embed_budget)
HANDED_FOR = 60.0  # seconds after handing a backlog over during which searches leave it be
DEFER_AT = 256  # a backlog larger than this is left to the background, the model not loaded
# more memories than this whose text is not indexed: a search ranks by the catalogue (names
# and descriptions) and leaves indexing the bodies to the background (about 50 µs a memory)
DEFER_TEXT_AT = 5_000
BY_CATALOG = "BM25 over names and descriptions alone"  # how ``describe`` says so


class Lookup:
    """The search index and vectors of one store's folder."""

    RETRY_AFTER = 30.0  # seconds before an embedder that failed is asked again

    def __init__(
        self,
        root: Path,
        internal: Path,
        config: Config,
        catalog: idx.Catalog,
        *,
        in_memory: bool,
        embedder: Embedder | None = None,
    ) -> None:
        self.root, self.internal, self.config = root, internal, config
        self.catalog = catalog
        self.in_memory = in_memory
        self.search: SearchIndex | None = None
        self.vectors: VectorIndex | None = None
        self.embedder: Embedder | None = embedder
        self.dense_error: str | None = None  # why ranking is BM25 alone this time
        self._pending: set[str] | None = None  # files the vectors must look at; None: all
        self._embedder_made = embedder is not None  # else made from the config when needed
        # seconds a search may spend embedding memories (the rest rank by BM25 until a later
        # one, or the background indexer, embeds them); None: all of them now (memdir index)
        self.embed_budget: float | None = min(config.embed_budget, LIBRARY_EMBED_BUDGET)
        self.progress: Callable[[int, int], None] | None = None
        # a library search hands a backlog its budget cannot finish to a background indexer
        # (``memdir index --background``) and embeds only its question from then on; the
        # commands and hooks, which pace embedding themselves, turn this off
        self.hand_over = embedder is None and not in_memory
        # a store whose backlog a background indexer may embed (not another's store)
        self.background = not in_memory
        self._handed_at: float | None = None
        self.last_bm25_only = False  # the last query was in a language the embedder lacks
        self.backlog = 0  # memories the last sync left without a vector (its budget ran out)
        self.defer_text_at = DEFER_TEXT_AT
        self.text_backlog = 0  # memories whose text the background indexes (the last search)
        self._by_catalog: tuple[int, CatalogText] | None = None  # for that search, by version
        self.repaired = False  # a damaged cache was rebuilt
        self._retry_at = 0.0
        # an agent's memory worker and its main thread may search at once
        self._mutex = threading.RLock()

    def close(self) -> None:
        for index in (self.search, self.vectors):
            if index is not None:
                index.close()
        self.search = self.vectors = None
        self._pending = None

    def _path(self, name: str) -> Path | str:
        path = self.internal / name
        return ":memory:" if self.in_memory or path.is_symlink() else path

    def _token(self) -> str | None:
        """The catalogue's files as a cache notes them when it matches them all (their names
        and identities, the size limit and the parsing rules that decide which are memories);
        None while an identity is too recent to trust."""
        if self.catalog.recheck:
            return None
        return f"{self.catalog.fingerprint:x}:{self.config.max_file_bytes}:{CACHE_VERSION}"

    def _identities(self, files: list[str] | None) -> dict[str, str | None]:
        current: dict[str, str | None] = {}
        state = self.catalog.state
        for f in state if files is None else files:
            rec = state.get(f)
            if rec is None or rec[1] is None:
                continue  # gone, or not a valid memory: not indexed
            key = self.catalog.key_of(f)
            current[f] = None if key is None else f"{key[0]}:{key[1]}:{key[2]}"
        return current

    def _read(self, fnames: list[str]) -> list[tuple[str, Memory]]:
        out = []
        for fname in fnames:
            mem = self.catalog.parsed(fname)  # just parsed by the catalogue: not read again
            try:
                if mem is None:
                    mem = memfile.read_memory(self.root / fname, self.config.max_file_bytes)
            except InvalidMemory:
                continue  # changed since the scan; the next sync picks it up
            out.append((fname, mem))
        return out

    def sync(self, dense: bool = False) -> SearchIndex:
        """Bring the full-text index up to date with the files, and the vectors if they are
        open or ``dense`` asks for them (the embedder is loaded on first need only). A cache
        found damaged is thrown away and built again from the files."""
        with self._mutex:
            try:
                return self._sync(dense)
            except sqlite3.DatabaseError as exc:
                if not damaged(exc):
                    raise
                self.discard(exc)
                return self._sync(dense)

    def discard(self, why: Exception | None = None) -> None:
        """Throw the caches away (damaged): the next sync builds them again from the files."""
        with self._mutex:
            for index in (self.search, self.vectors):
                if index is not None:
                    with contextlib.suppress(sqlite3.Error):
                        index.close()
            for name in (SEARCH, VECTORS):
                path = self._path(name)
                for suffix in ("", "-wal", "-shm"):
                    if isinstance(path, Path):
                        with contextlib.suppress(FileNotFoundError):
                            Path(str(path) + suffix).unlink()
            self.search = self.vectors = None
            self._pending = None
            self.repaired = True
            log.warning(
                "memdir: the search cache of %s was damaged (%s); rebuilt from the files",
                self.root,
                why,
            )

    def _sync(self, dense: bool = True) -> SearchIndex:
        from .search import Doc, SearchIndex

        files: list[str] | None = None  # None: compare every file by identity
        token: str | None = None  # the files as the cache notes them, when it is first opened
        if self.search is None:
            self.search = SearchIndex(self._path(SEARCH))
            token = self._token()
            if token is not None and self.search.in_line_with(token):
                files = []  # found to match these very files, and not written since
        else:
            files = list(self.catalog.changed | self.catalog.recheck)
        if self._pending is not None and files:
            self._pending.update(files)
        self.catalog.changed.clear()
        if files != []:
            current = self._identities(files)

            def load(stale: list[str]) -> list[Doc]:
                return [
                    Doc(f, current[f], m.name, m.description, m.body) for f, m in self._read(stale)
                ]

            self.search.sync(current, load, only=files)
            if files is None and token is not None:
                self.search.note_in_line(token, current)
        if dense or self.vectors is not None:
            self._sync_vectors()
        return self.search

    def _make_embedder(self) -> None:
        """The configuration's embedder, made once (at the first search, or when asked)."""
        if not self._embedder_made:
            self._embedder_made = True
            from .embed import EmbedError, from_config

            try:
                self.embedder = from_config(self.config)
            except EmbedError as exc:  # a missing model file: BM25, and say why
                self.dense_error = str(exc)
                log.warning("memdir: hybrid search is off: %s", exc)

    def _sync_vectors(self) -> None:
        if self._defer_dense():
            return
        self._make_embedder()
        if self.embedder is None:
            return
        if self.dense_error is not None:
            if time.monotonic() < self._retry_at:
                return  # an endpoint that just failed: BM25 alone for a while, no wait each
            self.dense_error = None  # time to try it again
        down = self._down()
        if down is not None:
            self.dense_error, self._retry_at = down, time.monotonic() + 1.0
            return
        from .vectors import Text, VectorIndex, memory_text

        token: str | None = None
        if self.vectors is None:
            self.vectors = VectorIndex(self._path(VECTORS), self.embedder)
            self._pending = None
            token = self._token()
            if token is not None and self.vectors.in_line_with(token):
                self._pending, self.backlog, self.dense_error = set(), 0, None
        files = None if self._pending is None else sorted(self._pending)
        if files == []:
            return
        current = self._identities(files)

        def load(stale: list[str]) -> list[Text]:
            return [
                Text(f, current[f], memory_text(m.name, m.description, m.body))
                for f, m in self._read(stale)
            ]

        budget = self.embed_budget
        if budget is not None and budget > 0 and (self._handed() or self._indexer_at_work()):
            budget = 0.0  # it embeds this backlog: a search embeds only its question
        try:
            left = self.vectors.sync(
                current, load, only=files, budget=budget, progress=self.progress
            )
        except MemdirError as exc:
            self.failed(exc)
            self._pending = set(current) if files is None else set(files)
            return
        self.dense_error = None
        self.backlog = left
        if files is None and not left and token is not None:
            self.vectors.note_in_line(token, current)
        # what is left (a budget ran out) is looked at again by the next sync
        self._pending = set() if not left else set(current)
        if (
            left
            and self.hand_over
            and budget
            and not self._handed()
            and embed_in_background(self.root)
        ):
            self._handed_at = time.monotonic()

    def _defer_dense(self) -> bool:
        """Whether this search leaves the vectors to the background without even loading
        the embedder: the store is mostly not embedded yet, more than ``DEFER_AT`` memories
        (seconds of embedding past any search's budget), so ranking would be BM25 alone
        anyway (``ranking``: fusing would favour the few with a vector), and loading a model
        costs the caller most of a second. Not for ``memdir index`` (no budget), a given
        embedder (nothing to load), or a store nobody embeds in the background."""
        if self._embedder_made or self.embed_budget is None or not self.background:
            return False
        from .embed import wanted

        total = len(self.catalog.entries)
        left = total - min(cache_count(self._path(VECTORS), "SELECT count(*) FROM docs"), total)
        if left <= DEFER_AT or left * 10 <= total or not wanted(self.config):
            return False  # a few to embed, (nearly) all embedded, or BM25 by choice: as before
        self.backlog = left
        self.dense_error = (
            f"{left} memories are not embedded yet (the background indexer embeds them):"
            " BM25 alone until then"
        )
        self._hand_over()
        return True

    def _hand_over(self) -> None:
        """Start a background indexer for this store's backlog, unless the caller starts one
        itself (commands and hooks, when they are done), one was started a moment ago, or one
        is at work."""
        if (
            self.hand_over
            and not self._handed()
            and not self._indexer_at_work()
            and embed_in_background(self.root)
        ):
            self._handed_at = time.monotonic()

    def _handed(self) -> bool:
        """Whether this search handed its backlog to a background indexer a moment ago (it
        may not hold the embedding lock yet)."""
        return self._handed_at is not None and time.monotonic() - self._handed_at < HANDED_FOR

    def _indexer_at_work(self) -> bool:
        """Whether a background ``memdir index`` holds this store's embedding lock now."""
        path = self._path(EMBEDDING_LOCK)
        return isinstance(path, Path) and indexer_at_work(path)

    def failed(self, exc: MemdirError) -> None:
        """The embedder failed: BM25 alone until ``RETRY_AFTER`` seconds have passed, in this
        process and in the others that open the store meanwhile (each hook is a new
        process: none of them waits for an endpoint that just timed out)."""
        self.dense_error = str(exc)
        self._retry_at = time.monotonic() + self.RETRY_AFTER
        log.warning("memdir: embedding failed, searching with BM25 alone: %s", exc)
        path = self._path(EMBED_DOWN)
        if isinstance(path, Path) and self.embedder is not None:
            import json

            from .atomic import write_atomic

            record = {
                "name": self.embedder.name,
                "error": str(exc)[:300],
                "until": time.time() + self.RETRY_AFTER,
                "pid": os.getpid(),
            }
            try:
                write_atomic(path, json.dumps(record).encode(), sync=False)
            except OSError:
                pass

    def _down(self) -> str | None:
        """Why the embedder is being left alone, if another process saw it fail just now."""
        path = self._path(EMBED_DOWN)
        if not isinstance(path, Path) or self.embedder is None:
            return None
        import json

        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            if (
                record.get("name") == self.embedder.name
                and record.get("pid") != os.getpid()
                and time.time() < float(record["until"])
            ):
                return str(record.get("error") or "it failed a moment ago")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
        return None

    def describe(self) -> str:
        """One line: how the last ranking was made (or the next will be)."""
        if self.text_backlog:
            return (
                f"ranking: {BY_CATALOG} ({self.text_backlog} memories are not in the search"
                " index yet: the background indexes their text)"
            )
        with self._mutex:
            if self._embedder_made or self.dense_error is None:  # deferred: not loaded for this
                self._make_embedder()
        if self.embedder is None:
            why = self.dense_error or (
                "embedder = 'none'"
                if self.config.embedder == "none"
                else "install memdir[embed] for hybrid search"
            )
            return f"ranking: BM25 alone ({why})"
        if self.dense_error:
            return f"ranking: BM25 alone ({self.embedder.name} failed: {self.dense_error})"
        if self.last_bm25_only:
            return (
                f"ranking: BM25 alone ({self.embedder.name} is English-only and the query is not)"
            )
        from .embed import baseline
        from .vectors import ALPHA

        b = baseline(self.embedder)
        cosine = "cosine" if not b else f"(cosine − {b:g}) / {1 - b:g}"
        return (
            f"ranking: hybrid, {1 - ALPHA:.1f} × {cosine} ({self.embedder.name}) +"
            f" {ALPHA:.1f} × (BM25 / best BM25)²"
        )

    def dense_ready(self, query: str) -> bool:
        """Whether this query can be ranked with vectors here (else BM25 alone)."""
        if self.vectors is None or self.dense_error is not None or self.embedder is None:
            return False
        from .embed import reads

        self.last_bm25_only = not reads(self.embedder, query)
        return not self.last_bm25_only

    # -- taking part in a ranking (``ranking.Ranker``) --------------------------------------

    def held(self) -> threading.RLock:
        return self._mutex

    def prepare(self, dense: bool) -> SearchIndex | CatalogText:
        if self.search is None and self._defer_text():
            return self._catalog_text()
        if self.text_backlog:  # indexed now: what is left to embed, the vectors' sync says
            self.text_backlog = self.backlog = 0
            self._by_catalog = None
        return self._sync(dense)

    def _defer_text(self) -> bool:
        """Whether this search ranks by the catalogue alone and leaves the text of the store
        to the background: more than ``defer_text_at`` memories are not in the search index
        yet (never-seen files, seconds of indexing past any search's budget). Not for ``memdir
        index`` (no budget) or a store nobody indexes in the background."""
        path = self._path(SEARCH)
        if self.embed_budget is None or not self.background or not isinstance(path, Path):
            return False  # (an index kept in memory is built by nobody else)
        left = len(self.catalog.entries) - indexed(path)
        if left <= self.defer_text_at:
            return False
        self.text_backlog = self.backlog = left
        self._hand_over()
        return True

    def _catalog_text(self) -> CatalogText:
        from .catalogtext import CatalogText

        version = self.catalog.version
        if self._by_catalog is None or self._by_catalog[0] != version:
            entries = self.catalog.entries.values()
            text = CatalogText((e.file, e.name, e.description) for e in entries)
            self._by_catalog = (version, text)
        return self._by_catalog[1]

    def size(self) -> int:
        return len(self.catalog.entries)

    def dense(self, qvec: Vectors, names: list[str]) -> Dense[str]:
        assert self.vectors is not None
        return self.vectors.cosines(qvec)

    def repair(self, exc: Exception) -> bool:
        if not isinstance(exc, sqlite3.DatabaseError) or not damaged(exc):
            return False
        self.discard(exc)
        return True


def to_hit(
    entry: Entry, ranked: Ranked, read: Callable[[Entry], Memory], scope: str | None = None
) -> Hit:
    """The search result for ``entry`` as a ranking found it."""
    return Hit(
        entry,
        ranked.score,
        scope,
        ranked.bm25_rank,
        ranked.bm25,
        ranked.dense_rank,
        ranked.cosine,
        read,
        ranked.close,
    )
