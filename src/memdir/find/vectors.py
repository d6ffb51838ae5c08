"""Embedding vectors of memories, a cache like the search index, and hybrid ranking.

Vectors are a part of the store's index (``<state>/index.sqlite``): one float16 row per
distinct content, keyed by a hash of the text embedded (name, description and body), so a
memory renamed back, restored or copied costs no new embedding. A second table maps each
memory file to its identity and hash, compared like the search index's to find what changed.
The part records the embedder's name and dimension and is emptied when either differs. In
memory, the vectors of the current files form one float32 matrix that a query multiplies
exactly (no approximate index): about 5 ms for 100,000 memories.

Ranking fuses BM25 and cosine linearly: ``(1 - ALPHA) * cosine + ALPHA * (bm25 / best) ** 2``,
over the BM25 candidates and the nearest vectors. A memory that shares no word with the query
is a hit only if its cosine reaches the embedder's ``min_similarity``.

This module does NOT read memory files (the store hands it the texts) and does NOT choose the
embedder (``embed.from_config`` does).
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .cachedb import CacheDB

if TYPE_CHECKING:
    from .embed import Embedder, Vectors

SCHEMA_VERSION = 1
ALPHA = 0.3  # BM25's share of the fused score; tuned on LoCoMo DEV (benchmarks/README.md)
DENSE_CANDIDATES = 100  # nearest vectors considered beside the BM25 candidates
BUDGET_BATCH = 16  # files read and embedded between two looks at a caller's budget
BATCH = 256  # texts embedded, then committed, at a time: an interrupted run keeps its work


@dataclass(frozen=True)
class Text:
    """One memory to embed: its key (file), file identity and the text embedded."""

    key: str
    identity: str | None
    text: str

    @property
    def digest(self) -> bytes:
        return hashlib.blake2b(self.text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(frozen=True)
class Ranked:
    """One hit of a hybrid ranking: fused score, and each method's rank (1-based) and score
    where that method found it."""

    key: Any  # a file name; (scope, file name) when several stores are ranked together
    score: float
    bm25_rank: int | None = None
    bm25: float | None = None
    dense_rank: int | None = None
    cosine: float | None = None
    close: bool = False  # the cosine reaches the embedder's bar for a hit by meaning alone


def memory_text(name: str, description: str, body: str) -> str:
    """What is embedded for a memory: its name as words, its description, its body."""
    return f"{name.replace('-', ' ').replace('_', ' ')}: {description}\n{body}".strip()


class VectorIndex(CacheDB):
    """The vectors of a store's memories, persisted in SQLite (or kept in memory), alone or
    beside the other parts of a store's index (``shared``)."""

    DOCS = "vec_docs"

    def __init__(
        self,
        path: Path | str,
        embedder: Embedder,
        *,
        shared: CacheDB | None = None,
        prefix: str = "",
    ) -> None:
        self.embedder = embedder
        self.vecs, self.docs = f"{prefix}vecs", f"{prefix}vec_docs"  # the tables' names
        self._keys: list[str] = []
        self._row: dict[str, int] = {}
        self._matrix: Vectors | None = None
        super().__init__(path, shared=shared, prefix=prefix)

    def _schema(self, db: sqlite3.Connection) -> None:
        self.built(
            db,
            "vectors",
            f"{SCHEMA_VERSION}/{self.embedder.name}/{self.embedder.dim}",
            f"""
                DROP TABLE IF EXISTS {self.vecs};
                DROP TABLE IF EXISTS {self.docs};
                CREATE TABLE {self.vecs} (hash BLOB PRIMARY KEY, vec BLOB NOT NULL);
                CREATE TABLE {self.docs} (key TEXT PRIMARY KEY, identity TEXT,
                    hash BLOB NOT NULL)
            """,
        )

    def reset(self) -> None:
        """Empty this part, and the matrix held of it."""
        super().reset()
        self._keys, self._row, self._matrix = [], {}, None

    def __len__(self) -> int:
        return (
            len(self._keys)
            if self._matrix is not None
            else int(self.db.execute(f"SELECT count(*) FROM {self.docs}").fetchone()[0])
        )

    # -- keeping up with the files ----------------------------------------------------------

    def sync(
        self,
        current: dict[str, str | None],
        load: Callable[[list[str]], list[Text]],
        *,
        only: list[str] | None = None,
        budget: float | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Bring the vectors in line with ``current`` (key -> identity), like
        ``SearchIndex.sync``; returns how many memories are still without a vector (only when
        ``budget`` seconds ran out first: they are embedded by a later sync)."""
        stale, removed = self.compare(current, only)
        if removed:
            with self.transaction() as db:
                db.executemany(f"DELETE FROM {self.docs} WHERE key = ?", [(k,) for k in removed])
            self._drop(removed)
        if not stale:
            return 0
        deadline = None if budget is None else time.monotonic() + budget
        # with a budget, small chunks read and embedded one at a time, the clock checked
        # before each: a caller waits about its budget, and files it has no time for are not
        # even read
        # (and when someone watches the progress: it can stop the run between chunks)
        size = BATCH if budget is None and progress is None else BUDGET_BATCH
        left = len(stale)
        done = 0
        for start in range(0, len(stale), size):
            if deadline is not None and time.monotonic() >= deadline:
                break
            chunk = stale[start : start + size]
            texts = load(chunk)
            digests = [t.digest for t in texts]
            have = self._have(set(digests))
            need: dict[bytes, str] = {}
            for t, d in zip(texts, digests, strict=True):
                if d not in have:
                    need.setdefault(d, t.text)
            todo = list(need.items())
            for at in range(0, len(todo), BATCH):
                batch = todo[at : at + BATCH]
                vectors = self.embedder.embed([text for _, text in batch])
                with self.transaction() as db:
                    db.executemany(
                        f"INSERT OR REPLACE INTO {self.vecs} VALUES (?, ?)",
                        [
                            (d, v.astype("float16").tobytes())
                            for (d, _), v in zip(batch, vectors, strict=True)
                        ],
                    )
                have.update(d for d, _ in batch)
            ready = [(t, d) for t, d in zip(texts, digests, strict=True) if d in have]
            with self.transaction() as db:
                db.executemany(
                    f"INSERT OR REPLACE INTO {self.docs} VALUES (?, ?, ?)",
                    [(t.key, t.identity, d) for t, d in ready],
                )
            if self._matrix is not None:
                self._put([t.key for t, _ in ready], self._vectors([d for _, d in ready]))
            left -= len(chunk) - len(texts) + len(ready)  # a file that cannot be read is not left
            done += len(chunk)
            if progress is not None:
                progress(done, len(stale))
        return left

    def forget_unused(self) -> None:
        """Drop the vectors no key maps to any more (texts that are gone for good)."""
        with self.transaction() as db:
            db.execute(f"DELETE FROM {self.vecs} WHERE hash NOT IN (SELECT hash FROM {self.docs})")

    def _have(self, digests: set[bytes]) -> set[bytes]:
        return {
            h
            for (h,) in self.select_in(
                f"SELECT hash FROM {self.vecs} WHERE hash IN ({{}})", list(digests)
            )
        }

    def _vectors(self, digests: list[bytes]) -> Vectors:
        import numpy as np

        rows = dict(
            self.select_in(f"SELECT hash, vec FROM {self.vecs} WHERE hash IN ({{}})", digests)
        )
        out = np.empty((len(digests), self.embedder.dim), dtype=np.float32)
        for i, d in enumerate(digests):
            out[i] = np.frombuffer(rows[d], dtype=np.float16)
        return out

    # -- the in-memory matrix ----------------------------------------------------------------

    def _load(self) -> Vectors:
        if self._matrix is None:
            import numpy as np

            # row by row into one float32 matrix: no list of every blob held at once
            n = self.db.execute(f"SELECT count(*) FROM {self.docs}").fetchone()[0]
            matrix = np.empty((n, self.embedder.dim), dtype=np.float32)
            keys: list[str] = []
            for key, vec in self.db.execute(
                f"SELECT d.key, v.vec FROM {self.docs} AS d"
                f" JOIN {self.vecs} AS v ON v.hash = d.hash"
            ):
                if len(keys) == n:
                    break  # a row added meanwhile: the next sync brings it
                matrix[len(keys)] = np.frombuffer(vec, dtype=np.float16)
                keys.append(key)
            self._keys = keys
            self._row = {k: i for i, k in enumerate(keys)}
            self._matrix = matrix[: len(keys)]
        return self._matrix

    def _put(self, keys: list[str], vectors: Vectors) -> None:
        import numpy as np

        matrix = self._load()
        new = [k for k in keys if k not in self._row]
        if new:
            matrix = np.concatenate([matrix, np.zeros((len(new), matrix.shape[1]), np.float32)])
            for k in new:
                self._row[k] = len(self._keys)
                self._keys.append(k)
        for k, v in zip(keys, vectors, strict=True):
            matrix[self._row[k]] = v
        self._matrix = matrix

    def _drop(self, keys: Iterable[str]) -> None:
        if self._matrix is None:
            return
        matrix = self._matrix
        for k in keys:
            i = self._row.pop(k, None)
            if i is None:
                continue
            last = len(self._keys) - 1
            if i != last:  # move the last row into the hole
                moved = self._keys[last]
                matrix[i] = matrix[last]
                self._keys[i] = moved
                self._row[moved] = i
            self._keys.pop()
        self._matrix = matrix[: len(self._keys)]

    # -- ranking -----------------------------------------------------------------------------

    def cosines(self, qvec: Vectors) -> Dense[str]:
        """Every memory's cosine with the (unit) query vector."""
        matrix = self._load()
        return Dense(self._keys, matrix @ qvec, self._row.get)


K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Dense(Generic[K]):
    """One vector index's answer to a query: its keys, their cosines, and a key's row."""

    keys: Sequence[K]
    cos: Vectors
    row: Callable[[K], int | None]


def hybrid(
    embedder: Embedder,
    query: str,
    bm25: list[tuple[K, float]],
    dense_of: Callable[[Vectors], list[Dense[K]]],
    k: int,
    *,
    explain: bool = False,
) -> list[Ranked]:
    """BM25 hits fused with the cosines ``dense_of`` gives for the query's vector: the query
    embedded as its model asks (e5's query prefix), the model's floor and baseline applied.
    One path for a store's search, over one index or several, and for the benchmark's."""
    from .embed import baseline, query_vector

    return fuse(
        bm25,
        dense_of(query_vector(embedder, query)),
        k,
        embedder.min_similarity,
        explain=explain,
        baseline=baseline(embedder),
    )


def fuse(
    bm25: list[tuple[K, float]],
    dense: list[Dense[K]],
    k: int,
    floor: float,
    *,
    explain: bool = False,
    baseline: float = 0.0,
) -> list[Ranked]:
    """Fuse BM25 hits (best first, scores on one scale) with the cosines of one or more vector
    indexes (keys distinct across them) into the ``k`` best. Candidates: every BM25 hit, and
    each index's nearest vectors whose cosine reaches ``floor``. Cosines count from
    ``baseline`` (that of unrelated texts for the model) to 1."""
    import numpy as np

    candidates: set[K] = {key for key, _ in bm25}
    for d in dense:
        n = len(d.keys)
        near = (
            np.argpartition(-d.cos, DENSE_CANDIDATES)[:DENSE_CANDIDATES]
            if n > DENSE_CANDIDATES
            else np.arange(n)
        )
        candidates.update(d.keys[i] for i in near if d.cos[i] >= floor)
    cos_of: dict[K, float] = {}
    for key in candidates:
        for d in dense:
            i = d.row(key)
            if i is not None:
                cos_of[key] = float(d.cos[i])
                break
    best = bm25[0][1] if bm25 else 1.0
    bm25_of = {key: (i + 1, s) for i, (key, s) in enumerate(bm25)}
    scored = []
    for key in candidates:
        c = cos_of.get(key)
        b = bm25_of.get(key)
        cos = 0.0 if c is None else (c - baseline) / (1 - baseline)
        fused = (1 - ALPHA) * cos + ALPHA * ((b[1] / best) ** 2 if b else 0.0)
        scored.append((fused, str(key), key, b, c))
    scored.sort(key=lambda s: (-s[0], s[1]))
    if explain:  # ranks among every memory of every index
        order = -np.sort(np.concatenate([d.cos for d in dense]))[::-1] if dense else None

        def dense_rank(c: float | None) -> int | None:
            if c is None or order is None:
                return None
            return int(np.searchsorted(order, -c, side="left")) + 1
    else:  # ranks among the candidates
        where = {c: i + 1 for i, c in enumerate(sorted(set(cos_of.values()), reverse=True))}

        def dense_rank(c: float | None) -> int | None:
            return None if c is None else where[c]

    return [
        Ranked(
            key,
            fused,
            b[0] if b else None,
            b[1] if b else None,
            dense_rank(c),
            c,
            c is not None and c >= floor,
        )
        for fused, _, key, b, c in scored[:k]
    ]
