"""Ranking a database store's memories the way a folder's are ranked: BM25 over the same
index terms (``search.columns_of``; CJK bigrams included) with the same scoring, candidates
from the postings table (term -> memory), fused with pgvector cosines from the configured
embedder by the same ``vectors.fuse``. So a question ranks the same memories on either
backend.

Vectors are made lazily, as for files: a search embeds memories that have none (or whose text
changed) within the caller's time budget and ranks the rest by BM25 until a later search or
``memdir index`` embeds them.
This module does NOT write memories.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from memdir.errors import MemdirError
from memdir.find.ranking import Ranking, Stats
from memdir.find.search import CANDIDATE_SHARE, CANDIDATES, MIN_POSTINGS, bm25, query_terms, weigh
from memdir.find.vectors import BATCH, DENSE_CANDIDATES, Dense, memory_text
from memdir_postgres.pgschema import lock_key

if TYPE_CHECKING:
    import psycopg

    from memdir.config import Config
    from memdir.find.embed import Embedder, Vectors

log = logging.getLogger("memdir")
ANALYZE_AFTER = 1000  # vectors written by one sync after which the table's statistics are renewed


class Database(Protocol):
    """What ranking needs of a database store (``pg.PgStore``): its connection, for reads and
    for one transaction, its catalogue caught up with every host's writes, and who it is."""

    sid: int  # the store's id in the shared tables
    config: Config
    read_only: bool
    member: bool  # a team member's connection (the tables' owner makes indexes)

    @property
    def version(self) -> int: ...
    def __len__(self) -> int: ...
    def reading(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...
    def writing(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...
    def catch_up(self) -> None: ...


class PgSearch:
    """BM25 and vectors over one database store."""

    RETRY_AFTER = 30.0  # seconds before an embedder that failed is asked again

    def __init__(self, db: Database, embedder: Embedder | None = None) -> None:
        self.db = db
        self.embedder = embedder
        self._made = embedder is not None
        self.dense_error: str | None = None
        self._retry_at = float("inf")  # when a failed embedder is asked again (never: broken)
        self.progress: Callable[[int, int], None] | None = None
        self.budget: float | None = None
        self.backlog = 0
        self.last: Ranking | None = None  # how the last search ranked (its searcher says)
        self._indexed: set[int] = set()
        self._synced = -1  # the store's version when every memory last had its vector
        self._mutex = threading.RLock()

    def close(self) -> None:
        pass

    # -- the store's ranking side (``base.Index``) ------------------------------------------

    def ranker(self) -> PgSearch:
        """BM25 over the postings and the vectors, the catalogue caught up."""
        self.db.catch_up()
        return self

    def pace(
        self, progress: Callable[[int, int], None] | None = None, budget: float | None = None
    ) -> None:
        self.progress, self.budget = progress, budget

    def _make_embedder(self) -> Embedder | None:
        if not self._made:
            self._made = True
            from memdir.find.embed import EmbedError, from_config

            try:
                self.embedder = from_config(self.db.config)
            except EmbedError as exc:
                self.dense_error = str(exc)
        return self.embedder

    # -- BM25 ------------------------------------------------------------------------------------

    candidates = CANDIDATES

    def stats(self, terms: list[str]) -> Stats:
        """Document frequencies of ``terms`` (those present), documents, tokens."""
        with self.db.reading() as conn:
            return self._stats(conn, terms)

    def _stats(self, conn: Any, terms: list[str]) -> Stats:
        sid = self.db.sid
        df = dict(
            conn.execute(
                "SELECT term, df FROM memdir_terms WHERE store = %s AND term = ANY(%s) AND df > 0",
                (sid, terms),
            ).fetchall()
        )
        n_docs, n_tokens = conn.execute(
            "SELECT docs, tokens FROM memdir_stores WHERE id = %s", (sid,)
        ).fetchone() or (0, 0)
        return df, int(n_docs), int(n_tokens)

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        stats: Stats | None = None,
        candidates: int | None = None,
    ) -> list[tuple[str, float]]:
        """The best ``k`` names for ``query`` with their BM25 scores, as ``SearchIndex.search``
        ranks a folder's memories (``stats`` and ``candidates`` as there)."""
        terms = query_terms(query)
        if not terms or k <= 0:
            return []
        sid = self.db.sid
        with self.db.reading() as conn:
            weighed = weigh(terms, lambda ts: self._stats(conn, ts), stats)
            if weighed is None:
                return []
            terms, df, idf = weighed.terms, weighed.df, weighed.idf
            cap = max(MIN_POSTINGS, CANDIDATE_SHARE * weighed.n_docs)
            gather = [t for t in terms if df[t] <= cap] or [min(terms, key=lambda t: df[t])]
            rest = sorted((t for t in terms if t not in gather), key=lambda t: df[t])
            while sum(df[t] for t in gather) < k and rest:  # too few: widen with the next rarest
                gather.append(rest.pop(0))
            limit = max(candidates or self.candidates, k)
            if len(gather) == 1:  # one term: every candidate weighs the same, take them in order
                rows = conn.execute(
                    "SELECT m.name, m.length, m.tok_name, m.tok_description, m.tok_body"
                    " FROM memdir_memories m WHERE m.store = %s AND m.name IN (SELECT name"
                    " FROM memdir_postings WHERE store = %s AND term = %s ORDER BY name LIMIT %s)",
                    (sid, sid, gather[0], limit),
                ).fetchall()
            else:
                rows = conn.execute(
                    "WITH q(term, w) AS (SELECT * FROM unnest(%s::text[], %s::float8[])),"
                    " c AS (SELECT p.name, sum(q.w) AS w FROM memdir_postings p"
                    " JOIN q ON p.term = q.term WHERE p.store = %s AND p.term = ANY(%s)"
                    " GROUP BY p.name"
                    " ORDER BY w DESC, p.name LIMIT %s)"
                    " SELECT m.name, m.length, m.tok_name, m.tok_description, m.tok_body"
                    " FROM c JOIN memdir_memories m ON m.store = %s AND m.name = c.name",
                    (gather, [idf[t] for t in gather], sid, gather, limit, sid),
                ).fetchall()
        scored = sorted(
            ((-bm25(cols, length, idf, weighed.avgdl), name) for name, length, *cols in rows),
        )
        return [(name, -neg) for neg, name in scored[:k]]

    # -- vectors ---------------------------------------------------------------------------------

    def _model(self, embedder: Embedder) -> str:
        return f"{embedder.name}/{embedder.dim}"

    def sync(self, budget: float | None) -> int:
        """Embed memories whose vector is missing or stale, for ``budget`` seconds at most
        (None: all); how many are left."""
        embedder = self._make_embedder()
        if embedder is None or self.db.read_only:  # another's store: its writers embed
            return 0
        seen = self.db.version
        if seen == self._synced and not self.backlog:
            return 0  # no memory changed since every one had its vector
        sid, model = self.db.sid, self._model(embedder)
        # only memories written since the last complete look can lack a vector
        since = self._synced if self._synced >= 0 and not self.backlog else -1
        stale_sql = (
            " FROM memdir_memories m LEFT JOIN memdir_vectors v ON v.store = m.store"
            " AND v.name = m.name AND v.model = %s WHERE m.store = %s AND m.seq > %s"
            " AND (v.name IS NULL OR v.digest <> m.embed_digest)"
        )
        start = time.monotonic()
        self._index_for(embedder.dim)
        with self.db.reading() as conn:
            (total,) = conn.execute(
                "SELECT count(*)" + stale_sql, (model, sid, since)
            ).fetchone() or (0,)
        done = 0
        while done < total:
            if budget is not None and time.monotonic() - start > budget:
                break
            with self.db.reading() as conn:
                rows = conn.execute(
                    "SELECT m.name, m.text, m.embed_digest" + stale_sql + " LIMIT %s",
                    (model, sid, since, BATCH),
                ).fetchall()
            if not rows:
                break
            texts = []
            from memdir.memory import loads

            for _, text, _ in rows:
                mem = loads(text)
                texts.append(memory_text(mem.name, mem.description, mem.body))
            vecs = embedder.embed(texts)
            with self.db.writing() as conn:
                conn.cursor().executemany(
                    "INSERT INTO memdir_vectors (store, name, model, dim, digest, embedding)"
                    " VALUES (%s, %s, %s, %s, %s, %s::vector) ON CONFLICT (store, name, model)"
                    " DO UPDATE SET digest = EXCLUDED.digest, embedding = EXCLUDED.embedding",
                    [
                        (sid, r[0], model, embedder.dim, r[2], _literal(v))
                        for r, v in zip(rows, vecs, strict=True)
                    ],
                )
            done += len(rows)
            if self.progress is not None:
                self.progress(done, int(total))
        # many new vectors: let the planner know the HNSW index pays (the tables' owner may)
        if done >= ANALYZE_AFTER and not self.db.member:
            with self.db.reading() as conn:
                conn.execute("ANALYZE memdir_vectors")
        self.backlog = max(0, int(total) - done)
        self._synced = seen
        return self.backlog

    def _index_for(self, dim: int) -> None:
        """An HNSW index over the vectors of this length (once per database and length):
        the nearest vectors are found without reading them all."""
        if dim in self._indexed or self.db.member:  # the tables' owner makes indexes
            return
        with self.db.writing() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("hnsw", dim),))
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS memdir_vectors_hnsw_{int(dim)} ON memdir_vectors"
                f" USING hnsw ((embedding::vector({int(dim)})) vector_cosine_ops)"
                f" WHERE dim = {int(dim)}"
            )
        self._indexed.add(dim)

    def _dense(self, qvec: Vectors, names: list[str], embedder: Embedder) -> Dense[str]:
        """The nearest vectors to the query and the cosines of ``names`` (BM25's hits)."""
        import numpy as np

        sid, model, q = self.db.sid, self._model(embedder), _literal(qvec)
        dim = int(embedder.dim)
        self._index_for(dim)
        with self.db.writing() as conn:
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            conn.execute("SET LOCAL hnsw.ef_search = 200")
            near = conn.execute(
                f"SELECT name, 1 - (embedding::vector({dim}) <=> %s::vector({dim}))"
                f" FROM memdir_vectors WHERE dim = {dim} AND store = %s AND model = %s"
                f" ORDER BY embedding::vector({dim}) <=> %s::vector({dim}) LIMIT %s",
                (q, sid, model, q, DENSE_CANDIDATES),
            ).fetchall()
            more = conn.execute(
                "SELECT name, 1 - (embedding <=> %s::vector) FROM memdir_vectors"
                " WHERE store = %s AND model = %s AND name = ANY(%s)",
                (q, sid, model, names),
            ).fetchall()
        cos = dict(near)
        cos.update(more)
        keys = list(cos)
        row = {k: i for i, k in enumerate(keys)}
        return Dense(keys, np.array([cos[k] for k in keys], dtype=np.float32), row.get)

    # -- taking part in a ranking (``ranking.Ranker``) ----------------------------------------

    def held(self) -> threading.RLock:
        return self._mutex

    def prepare(self, dense: bool) -> PgSearch:
        if self.dense_error is not None and time.monotonic() >= self._retry_at:
            self.dense_error = None  # an endpoint that failed a while ago: asked again
        if dense and self._make_embedder() is not None and self.dense_error is None:
            try:
                self.sync(self.budget)
            except MemdirError as exc:
                self.failed(exc)
        return self

    def size(self) -> int:
        return len(self.db)

    def not_dense(self, query: str) -> str | None:
        if self.embedder is None or self.dense_error is not None:
            return self._why_not(self.embedder)
        from memdir.find.embed import reads

        if not reads(self.embedder, query):
            return f"{self.embedder.name} is English-only and the query is not"
        return None

    def _why_not(self, embedder: Embedder | None) -> str:
        if embedder is None:
            return self.dense_error or "no embedder configured"
        return f"{embedder.name} failed: {self.dense_error}"

    def dense(self, qvec: Vectors, names: list[str]) -> Dense[str]:
        assert self.embedder is not None
        return self._dense(qvec, names, self.embedder)

    def failed(self, exc: MemdirError) -> None:
        """The embedder failed: BM25 alone for ``RETRY_AFTER`` seconds, then asked again (a
        long-running server is not BM25-only for good after one timeout)."""
        self.dense_error = str(exc)
        self._retry_at = time.monotonic() + self.RETRY_AFTER
        log.warning("memdir: search by meaning failed, BM25 alone: %s", exc)

    def repair(self, exc: Exception) -> bool:
        return False  # the database keeps no cache of its own to throw away

    def embed_all(self, progress: Callable[[int, int], None] | None = None) -> int:
        saved, self.progress = self.progress, progress
        try:
            left = self.sync(None)
        finally:
            self.progress = saved
        if self.embedder is None or self.dense_error:
            return 0
        return len(self.db) - left

    def describe(self) -> str:
        if self.last is not None and self.last.why is not None:
            return f"ranking: BM25 alone ({self.last.why})"
        embedder = self._make_embedder()
        if embedder is None or self.dense_error:
            return f"ranking: BM25 alone ({self._why_not(embedder)})"
        from memdir.find.vectors import ALPHA

        return (
            f"ranking: hybrid in PostgreSQL, {1 - ALPHA:.1f} × cosine ({embedder.name},"
            f" pgvector) + {ALPHA:.1f} × (BM25 / best BM25)²"
        )


def _literal(vector: Any) -> str:
    """A vector as pgvector's text form."""
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"
