"""One ranking for every backend: BM25 with the statistics of all the stores asked together
(so that scores compare), fused with cosines when every store has vectors from one embedder.

A store takes part through a ``Ranker`` (``Store.ranker()``): a folder's ``lookup.Lookup``
(SQLite FTS5 and a vector file), a database's ``pgsearch.PgSearch`` (postings and pgvector).
``rank_many`` is the only place that decides how a question is ranked, for one store's
``search`` and for ``Scopes``' search over several alike.
This module does NOT know where memories are kept and does NOT read them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, overload

from ..errors import MemdirError

if TYPE_CHECKING:
    from .embed import Embedder, Vectors
    from .vectors import Dense, Ranked

Stats = tuple[dict[str, int], int, int]  # document frequencies, documents, tokens


class FullText(Protocol):
    """A store's BM25 side, caught up with its memories."""

    candidates: int  # how many documents one search scores exactly

    def stats(self, terms: list[str]) -> Stats:
        """Document frequencies of ``terms`` (those present), documents, tokens."""
        ...

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        stats: Stats | None = None,
        candidates: int | None = None,
    ) -> list[tuple[str, float]]:
        """The best ``k`` keys with their BM25 scores; ``stats`` (summed over several stores)
        scores against the larger corpus, ``candidates`` is this store's share."""
        ...


@dataclass(frozen=True)
class Ranking:
    """How one question was ranked: the hits, best first, and whether vectors took part —
    when they were asked for and did not, ``why`` (``Index.describe`` says it)."""

    hits: list[Ranked] = field(default_factory=list)
    hybrid: bool = False
    why: str | None = None  # why BM25 alone this time (None: hybrid, or BM25 was asked for)


class Ranker(Protocol):
    """What a store gives ``rank_many``: its full-text side, its vectors, its embedder."""

    embedder: Embedder | None
    backlog: int  # memories without a vector yet

    def held(self) -> AbstractContextManager[Any]:
        """Exclusive use while one ranking is made (a worker thread may search too)."""
        ...

    def prepare(self, dense: bool) -> FullText:
        """Catch the indexes up (the vectors too when ``dense``, within the store's budget)."""
        ...

    def size(self) -> int:
        """How many memories the store ranks."""
        ...

    def not_dense(self, query: str) -> str | None:
        """Why this query cannot be ranked with vectors here (no embedder, it failed a moment
        ago, a language it lacks); None: it can."""
        ...

    def dense(self, qvec: Vectors, names: list[str]) -> Dense[str]:
        """Cosines of the query's vector: the nearest memories, and ``names`` (BM25's)."""
        ...

    def failed(self, exc: MemdirError) -> None:
        """The embedder failed: BM25 alone for a while, and say why."""
        ...

    def repair(self, exc: Exception) -> bool:
        """A cache found damaged by ``exc`` was thrown away (True: rank again)."""
        ...


def rank_many(
    rankers: Sequence[Ranker], query: str, k: int, *, explain: bool = False, dense: bool = True
) -> Ranking:
    """The ``k`` best memories of one or more stores (keys ``(store index, key)``): BM25 with
    the statistics of all of them together, so that scores compare, fused with cosines when
    ``dense`` and every store has vectors from one embedder; with why not, when not."""
    if not rankers:
        return Ranking()
    try:
        return _rank_many(rankers, query, k, explain=explain, dense=dense)
    except Exception as exc:
        if not [r for r in rankers if r.repair(exc)]:
            raise
        return _rank_many(rankers, query, k, explain=explain, dense=dense)


def _rank_many(
    rankers: Sequence[Ranker], query: str, k: int, *, explain: bool, dense: bool
) -> Ranking:
    from .search import query_terms
    from .vectors import Dense, Ranked, hybrid

    with ExitStack() as held:
        for ranker in rankers:  # always in the same order: no two searches deadlock
            held.enter_context(ranker.held())
        sides = [ranker.prepare(dense) for ranker in rankers]
        why = _why_not_dense(rankers, query) if dense else None
        dense = dense and why is None
        pool = max(k, 100) if dense else k
        bm25: list[tuple[tuple[int, str], float]] = []
        if len(sides) == 1:  # its own statistics are the whole corpus's
            bm25 = [((0, key), s) for key, s in sides[0].search(query, pool)]
        else:
            terms = query_terms(query)
            df: dict[str, int] = {}
            sizes = []
            tokens = 0
            for side in sides:
                part, n_docs, n_tokens = side.stats(terms)
                for t, n in part.items():
                    df[t] = df.get(t, 0) + n
                sizes.append(n_docs)
                tokens += n_tokens
            docs = sum(sizes)
            for i, side in enumerate(sides):
                # each store scores its share of the candidates one store would score
                share = max(pool, side.candidates * max(1, sizes[i]) // max(1, docs))
                bm25 += [
                    ((i, key), s)
                    for key, s in side.search(
                        query, pool, stats=(df, docs, tokens), candidates=share
                    )
                ]
        bm25.sort(key=lambda h: (-h[1], h[0]))
        if dense:
            embedder = rankers[0].embedder
            assert embedder is not None

            def of_query(qvec: Vectors) -> list[Dense[tuple[int, str]]]:
                out = []
                for i, ranker in enumerate(rankers):
                    d = ranker.dense(qvec, [key for (j, key), _ in bm25 if j == i])
                    out.append(Dense(_Tagged(i, d.keys), d.cos, _row_in(i, d.row)))
                return out

            try:
                return Ranking(hybrid(embedder, query, bm25, of_query, k, explain=explain), True)
            except MemdirError as exc:  # the embedder failed: BM25 alone, and say why
                for ranker in rankers:
                    ranker.failed(exc)
                why = str(exc)
        return Ranking([Ranked(key, s, n + 1, s) for n, (key, s) in enumerate(bm25[:k])], why=why)


def _why_not_dense(rankers: Sequence[Ranker], query: str) -> str | None:
    """Why the question is ranked by BM25 alone though vectors were asked for (None: it is
    not)."""
    for ranker in rankers:
        if (why := ranker.not_dense(query)) is not None:
            return why
    names = {r.embedder.name for r in rankers if r.embedder is not None}
    if len(names) > 1:
        return f"the stores' embedders differ ({', '.join(sorted(names))})"
    # a store mostly not embedded yet ranks by BM25 alone: fusing would favour the few
    # memories that have a vector over the many that do not
    for ranker in rankers:
        if ranker.backlog * 10 > ranker.size():
            return (
                f"{ranker.backlog} memories are not embedded yet (the store's worker embeds"
                " them): BM25 alone until then"
            )
    return None


class _Tagged(Sequence[tuple[int, str]]):
    """Store ``index``'s keys as ``(index, key)``, made only for the few looked at (a query
    must not build a tuple for each of 100,000 memories)."""

    def __init__(self, index: int, keys: Sequence[str]) -> None:
        self.store_index, self.keys = index, keys

    def __len__(self) -> int:
        return len(self.keys)

    @overload
    def __getitem__(self, i: int) -> tuple[int, str]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[int, str]]: ...
    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [(self.store_index, k) for k in self.keys[i]]
        return (self.store_index, self.keys[i])


def _row_in(
    index: int, row: Callable[[str], int | None]
) -> Callable[[tuple[int, str]], int | None]:
    """A key's row in store ``index``'s matrix (None for other stores' keys)."""

    def lookup(key: tuple[int, str]) -> int | None:
        return row(key[1]) if key[0] == index else None

    return lookup
