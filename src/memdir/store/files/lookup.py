"""Finding memories in a store: the full-text index and, when an embedder is configured, the
vectors, both parts of the store's one index (``storeindex``), fused into one ranking.

The full-text part is written with the catalogue's rows, in the same transaction, so it is
always in step with the files the catalogue saw. The vectors follow: a search embeds the
memories whose text changed since they were embedded, within its time budget (the rest rank
by BM25 until a later search, ``memdir index`` or the background indexer embeds them). An
embedder that fails (an endpoint down) does not fail a search: ranking falls back to BM25 and
the search's ``ranking.Ranking`` says why. A query in Chinese, Japanese or Korean is ranked by
BM25 alone when the embedder is English-only.

This module does NOT write memories and does NOT decide which embedder to use
(``embed.from_config`` does).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ... import memfile
from ...config import Config
from ...disk.layout import EMBED_DOWN
from ...disk.statefile import read_json, write_hint
from ...errors import InvalidMemory, MemdirError
from ...find.cachedb import damaged
from ...jobs import index_in_background, indexing
from ...memory import Memory

if TYPE_CHECKING:
    from ...find.embed import Embedder, Vectors
    from ...find.ranking import Ranking
    from ...find.search import SearchIndex
    from ...find.vectors import Dense
    from .catalog import Catalog
    from .folder import Folder

log = logging.getLogger("memdir")


LIBRARY_EMBED_BUDGET = 0.5  # seconds a library search embeds (commands set embed_budget)
HANDED_FOR = 60.0  # seconds after handing a backlog over during which searches leave it be
DEFER_AT = 256  # a backlog larger than this is left to the background, the model not loaded


class Lookup:
    """The search side of one store's folder: its index's full-text part and vectors."""

    RETRY_AFTER = 30.0  # seconds before an embedder that failed is asked again

    def __init__(
        self,
        root: Path,
        internal: Path,
        config: Config,
        folder: Folder,
        *,
        in_memory: bool,
        embedder: Embedder | None = None,
    ) -> None:
        self.root, self.internal, self.config = root, internal, config
        self.folder = folder
        self.in_memory = in_memory
        self.embedder: Embedder | None = embedder
        self.dense_error: str | None = None  # why ranking is BM25 alone this time
        self._pending: set[str] | None = None  # files the vectors must look at; None: all
        self._embedder_made = embedder is not None  # else made from the config when needed
        # seconds a search may spend embedding memories (the rest rank by BM25 until a later
        # one, or the background indexer, embeds them); None: all of them now (memdir index)
        self.embed_budget: float | None = min(config.embed_budget, LIBRARY_EMBED_BUDGET)
        self.progress: Callable[[int, int], None] | None = None
        # a library search hands a backlog its budget cannot finish to a background indexer
        # (an index job for the store's worker) and embeds only its question from then on; the
        # commands and hooks, which pace embedding themselves, turn this off
        self.hand_over = embedder is None and not in_memory
        # a store whose backlog a background indexer may embed (not another's store)
        self.background = not in_memory
        self._handed_at: float | None = None
        self.last: Ranking | None = None  # how the last search ranked (its searcher says)
        self.backlog = 0  # memories the last sync left without a vector (its budget ran out)
        self._retry_at = 0.0
        self._vectors_open = False  # the vectors were asked for in this process
        # an agent's memory worker and its main thread may search at once
        self._mutex = threading.RLock()

    @property
    def catalog(self) -> Catalog:
        return self.folder.catalog

    @property
    def search(self) -> SearchIndex:
        """The full-text part of the store's index."""
        return self.folder.db.text

    def close(self) -> None:
        self._pending = None
        self._vectors_open = False

    # -- the store's ranking side (``store.base.Index``) -------------------------------------

    def ranker(self) -> Lookup:
        """The full text and vectors, the catalogue caught up (``rank_many`` ranks with them)."""
        self.folder.catch_up()
        return self

    def pace(
        self, progress: Callable[[int, int], None] | None = None, budget: float | None = None
    ) -> None:
        """How searches embed memories that have no vector yet: ``progress(done, total)`` is
        called after each batch; with ``budget``, a search embeds for at most that many
        seconds and ranks the rest by BM25 until a later search (or the store's worker, which
        the caller asks for) embeds them."""
        self.progress, self.embed_budget = progress, budget
        self.hand_over = False  # the caller paces embedding: it queues no index job

    def embed_all(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Bring the vectors up to date now (``memdir index``, the worker), however long it
        takes; how many memories have a vector to find them by meaning (0: no embedder)."""
        self.folder.catch_up()
        saved = self.progress, self.embed_budget
        self.progress, self.embed_budget = progress, None
        try:
            self.sync(dense=True)
        finally:
            self.progress, self.embed_budget = saved
        if self.embedder is None or self.dense_error:
            return 0
        return len(self.catalog.entries)

    def _path(self, name: str) -> Path | None:
        return None if self.in_memory else self.internal / name

    def _identities(self, files: list[str] | None) -> dict[str, str | None]:
        """The identities of these files (all: None) as the index keeps them; None for one
        too recent to trust (read again)."""
        from .storeindex import identity

        current: dict[str, str | None] = {}
        state = self.catalog.state
        for f in state if files is None else files:
            rec = state.get(f)
            if rec is None or rec[1] is None:
                continue  # gone, or not a valid memory: not indexed
            current[f] = identity(self.catalog.key_of(f))
        return current

    def _read(self, fnames: list[str]) -> list[tuple[str, Memory]]:
        out = []
        for fname in fnames:
            try:
                mem = memfile.read_memory(self.root / fname, self.config.max_file_bytes)
            except InvalidMemory:
                continue  # changed since the scan; the next sync picks it up
            out.append((fname, mem))
        return out

    def sync(self, dense: bool = False) -> SearchIndex:
        """The full-text part, with the vectors brought up to date too if they are open or
        ``dense`` asks for them (the embedder is loaded on first need only). An index found
        damaged is thrown away and built again from the files."""
        with self._mutex:
            try:
                return self._sync(dense)
            except sqlite3.DatabaseError as exc:
                if not damaged(exc):
                    raise
                self.discard(exc)
                return self._sync(dense)

    def discard(self, why: Exception | None = None) -> None:
        """Throw the store's index away (damaged): built again from the files now."""
        with self._mutex:
            self.folder.rebuild_index(why)
            self.folder.sweep()
            self._pending = None

    def _sync(self, dense: bool = True) -> SearchIndex:
        self.folder.save()
        files = list(self.catalog.changed | self.catalog.recheck)
        if self._pending is not None and files:
            self._pending.update(files)
        self.catalog.changed.clear()
        if dense or self._vectors_open:
            self._sync_vectors()
        return self.search

    def _make_embedder(self) -> None:
        """The configuration's embedder, made once (at the first search, or when asked)."""
        if not self._embedder_made:
            self._embedder_made = True
            from ...find.embed import EmbedError, from_config

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
        from ...find.vectors import Text, memory_text

        if not self._vectors_open:
            self._vectors_open, self._pending = True, None  # compared file by file once
        vectors = self.folder.db.vectors(self.embedder)
        if vectors.rebuilt:  # (emptied: another embedder's, or new)
            vectors.rebuilt, self._pending = False, None
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
            left = vectors.sync(current, load, only=files, budget=budget, progress=self.progress)
        except MemdirError as exc:
            self.failed(exc)
            self._pending = set(current) if files is None else set(files)
            return
        self.dense_error = None
        self.backlog = left
        # what is left (a budget ran out) is looked at again by the next sync
        self._pending = set() if not left else set(current)
        if (
            left
            and self.hand_over
            and budget
            and not self._handed()
            and index_in_background(self.root, start=self.config.background != "off")
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
        from ...find.embed import wanted

        total = len(self.catalog.entries)
        left = total - min(self.folder.db.vector_count(), total)
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
            and index_in_background(self.root, start=self.config.background != "off")
        ):
            self._handed_at = time.monotonic()

    def _handed(self) -> bool:
        """Whether this search handed its backlog to a background indexer a moment ago (it
        may not hold the embedding lock yet)."""
        return self._handed_at is not None and time.monotonic() - self._handed_at < HANDED_FOR

    def _indexer_at_work(self) -> bool:
        """Whether the store's worker has an index job queued or at work."""
        return not self.in_memory and indexing(self.internal)

    def failed(self, exc: MemdirError) -> None:
        """The embedder failed: BM25 alone until ``RETRY_AFTER`` seconds have passed, in this
        process and in the others that open the store meanwhile (each hook is a new
        process: none of them waits for an endpoint that just timed out)."""
        self.dense_error = str(exc)
        self._retry_at = time.monotonic() + self.RETRY_AFTER
        log.warning("memdir: embedding failed, searching with BM25 alone: %s", exc)
        path = self._path(EMBED_DOWN)
        if path is not None and self.embedder is not None:
            until = time.time() + self.RETRY_AFTER
            write_hint(
                path,
                {
                    "name": self.embedder.name,
                    "error": str(exc)[:300],
                    "until": until,
                    "pid": os.getpid(),
                },
            )

    def _down(self) -> str | None:
        """Why the embedder is being left alone, if another process saw it fail just now."""
        path = self._path(EMBED_DOWN)
        if path is None or self.embedder is None:
            return None
        record = read_json(path)
        until = record.get("until")
        if (
            record.get("name") == self.embedder.name
            and record.get("pid") != os.getpid()
            and isinstance(until, (int, float))
            and time.time() < until
        ):
            return str(record.get("error") or "it failed a moment ago")
        return None

    def describe(self) -> str:
        """One line: how the last ranking was made (or the next will be)."""
        if self.last is not None and self.last.why is not None:
            return f"ranking: BM25 alone ({self.last.why})"
        with self._mutex:
            if self._embedder_made or self.dense_error is None:  # deferred: not loaded for this
                self._make_embedder()
        if self.embedder is None or self.dense_error:
            return f"ranking: BM25 alone ({self._why_not()})"
        from ...find.embed import baseline
        from ...find.vectors import ALPHA

        b = baseline(self.embedder)
        cosine = "cosine" if not b else f"(cosine − {b:g}) / {1 - b:g}"
        return (
            f"ranking: hybrid, {1 - ALPHA:.1f} × {cosine} ({self.embedder.name}) +"
            f" {ALPHA:.1f} × (BM25 / best BM25)²"
        )

    def _why_not(self) -> str:
        """Why no vectors rank here now (the embedder is missing or failed)."""
        if self.embedder is None:
            return self.dense_error or (
                "embedder = 'none'"
                if self.config.embedder == "none"
                else "install memdir[embed] for hybrid search"
            )
        return f"{self.embedder.name} failed: {self.dense_error}"

    def not_dense(self, query: str) -> str | None:
        """Why this query is ranked by BM25 alone here (None: with vectors too)."""
        if self.embedder is None or self.dense_error is not None:
            return self._why_not()
        if not self._vectors_open:
            return "the vectors are not read yet"
        from ...find.embed import reads

        if not reads(self.embedder, query):
            return f"{self.embedder.name} is English-only and the query is not"
        return None

    # -- taking part in a ranking (``ranking.Ranker``) --------------------------------------

    def held(self) -> threading.RLock:
        return self._mutex

    def prepare(self, dense: bool) -> SearchIndex:
        return self._sync(dense)

    def size(self) -> int:
        return len(self.catalog.entries)

    def dense(self, qvec: Vectors, names: list[str]) -> Dense[str]:
        assert self.embedder is not None
        return self.folder.db.vectors(self.embedder).cosines(qvec)

    def repair(self, exc: Exception) -> bool:
        if not isinstance(exc, sqlite3.DatabaseError) or not damaged(exc):
            return False
        self.discard(exc)
        return True
