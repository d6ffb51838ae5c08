"""Full-text search over memories: a derived SQLite FTS5 index with BM25 ranking.

Text is tokenised here, not by SQLite: English (and other Latin-script) words are lower-cased,
stop words dropped and Snowball-stemmed; runs of Chinese, Japanese or Korean characters become
overlapping character bigrams, so any word of two or more characters is found without a
dictionary. The index is a part of the store's index (``<state>/index.sqlite``) and a cache:
it is brought up to date incrementally from the files (by file identity) and rebuilt if
deleted or unreadable.
This module does NOT read memory files itself (the store hands it the texts).
"""

from __future__ import annotations

import heapq
import math
import re
import sqlite3
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import Stemmer

from ..gate.safetext import CJK, CJK_CHAR
from .cachedb import CacheDB

SCHEMA_VERSION = 3
K1, B = 1.2, 0.75  # BM25 parameters, as Lucene and SQLite use them
# Candidates for a query are gathered from its terms that occur in at most this share of the
# documents (at least MIN_POSTINGS), ranked by the IDF they match, then scored exactly.
CANDIDATE_SHARE = 0.1
MIN_POSTINGS = 1000
CANDIDATES = 200
# BM25 column weights: name, description, body. The description is written to say what the
# memory is about, so it weighs most; the name is a slug of the same idea.
WEIGHTS = (2.0, 3.0, 1.0)

_CJK = CJK
_TOKEN = re.compile(f"[{_CJK}]+|[^\\W_{_CJK}]+(?:'[^\\W_{_CJK}]+)?")
_ASCII_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)?")  # the same on lowercase ASCII, faster

STOP_WORDS = frozenset(
    """
a about above after again against all am an and any are aren't as at be because been before
being below between both but by can can't cannot could couldn't did didn't do does doesn't
doing don't down during each few for from further had hadn't has hasn't have haven't having he
he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if
in into is isn't it it's its itself let's me more most mustn't my myself no nor not of off on
once only or other ought our ours ourselves out over own same shan't she she'd she'll she's
should shouldn't so some such than that that's the their theirs them themselves then there
there's these they they'd they'll they're they've this those through to too under until up very
was wasn't we we'd we'll we're we've were weren't what what's when when's where where's which
while who who's whom why why's with won't would wouldn't you you'd you'll you're you've your
yours yourself yourselves also just s t d ll m o re ve y
""".split()
)

_stemmer = Stemmer.Stemmer("english")


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return str(_stemmer.stemWord(word))


_STEMS: dict[str, str] = {}  # a word as found (apostrophes kept) -> its stem


def _ascii_stem(word: str) -> str:
    stem = _STEMS.get(word)
    if stem is None:
        stem = _stem(word.replace("'", ""))
        if len(_STEMS) < 200_000:
            _STEMS[word] = stem
    return stem


def tokenize(text: str) -> list[str]:
    """Index terms of ``text``: stemmed words without stop words, and CJK bigrams."""
    lowered = unicodedata.normalize("NFKC", text).lower()
    if lowered.isascii():  # no CJK, every word stemmed: the common case, without the checks
        stems = _STEMS
        return [
            stems.get(w) or _ascii_stem(w)
            for w in _ASCII_TOKEN.findall(lowered)
            if w not in STOP_WORDS
        ]
    out: list[str] = []
    for run in _TOKEN.findall(lowered):
        first = run[0]
        if first >= "\u1100" and _is_cjk(first):
            if len(run) == 1:
                out.append(run)
            else:
                out.extend(run[i : i + 2] for i in range(len(run) - 1))
        elif run not in STOP_WORDS:
            out.append(_stem(run.replace("'", "")) if run.isascii() else run)
    return out


def columns_of(name: str, description: str, body: str) -> tuple[list[str], list[str], list[str]]:
    """The index terms of a memory's name, description and body (what BM25 weighs)."""
    return tokenize(name.replace("-", " ")), tokenize(description), tokenize(body)


def bm25(columns: Iterable[str], length: int, idf: dict[str, float], avgdl: float) -> float:
    """The BM25 score of one document from its tokenised columns (name, description, body:
    tokens joined by spaces): column-weighted presence (a term counts once per column),
    length-normalised. One scoring for every backend."""
    freq: dict[str, float] = {}
    for weight, text in zip(WEIGHTS, columns, strict=True):
        for t in set(text.split()) & idf.keys():
            freq[t] = freq.get(t, 0.0) + weight
    return bm25_of(freq, length, idf, avgdl)


def bm25_of(freq: Mapping[str, float], length: int, idf: dict[str, float], avgdl: float) -> float:
    """The BM25 score of one document from each matched term's column weight in it."""
    norm = K1 * (1 - B + B * length / avgdl)
    return sum(idf[t] * f * (K1 + 1) / (f + norm) for t, f in freq.items())


def idf_of(terms: Iterable[str], df: dict[str, int], n_docs: int) -> dict[str, float]:
    """Lucene's IDF of each term, given its document frequency among ``n_docs``."""
    return {t: math.log(1 + (n_docs - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}


Stats = tuple[dict[str, int], int, int]  # document frequencies, documents, tokens


def query_terms(query: str) -> list[str]:
    """The index terms of a query, each once, in order."""
    return list(dict.fromkeys(tokenize(query)))


@dataclass(frozen=True)
class Weighed:
    """A query's terms as BM25 weighs them in one corpus."""

    terms: list[str]  # those the corpus holds
    df: dict[str, int]  # their document frequencies there
    n_docs: int  # the corpus's documents
    idf: dict[str, float]  # against the statistics scored with (several corpora's, summed)
    avgdl: float  # the mean document length, the same


def weigh(
    terms: list[str], stats_of: Callable[[list[str]], Stats], stats: Stats | None
) -> Weighed | None:
    """How ``terms`` are weighed in the corpus whose ``stats_of`` they are, scored against
    ``stats`` when given (else its own); None when the corpus holds none of them."""
    df, n_docs, n_tokens = stats_of(terms)
    found = [t for t in terms if t in df]
    if not found:
        return None
    g_df, g_docs, g_tokens = stats or (df, n_docs, n_tokens)
    idf = idf_of(found, {t: g_df.get(t, df[t]) for t in found}, g_docs)
    return Weighed(found, df, n_docs, idf, g_tokens / max(1, g_docs))


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _is_cjk(ch: str) -> bool:
    return CJK_CHAR.match(ch) is not None


@dataclass(frozen=True)
class Doc:
    """One document to index: a key (the memory's file), its identity, and its fields."""

    key: str
    identity: str | None
    name: str
    description: str
    body: str


class SearchIndex(CacheDB):
    """An FTS5 index of documents, kept in a SQLite file (or in memory), alone or beside the
    other parts of a store's index (``shared``)."""

    def __init__(
        self,
        path: Path | str = ":memory:",
        *,
        shared: CacheDB | None = None,
        candidate_share: float = CANDIDATE_SHARE,
        min_postings: int = MIN_POSTINGS,
        candidates: int = CANDIDATES,
        prefix: str = "",
    ) -> None:
        self.candidate_share = candidate_share
        self.min_postings = min_postings
        self.candidates = candidates
        # the tables' names (``prefix``: a second index of documents in the same file)
        self.docs, self.fts = f"{prefix}docs", f"{prefix}fts"
        self.vocab, self.totals = f"{prefix}fts_vocab", f"{prefix}stats"
        super().__init__(path, shared=shared, prefix=prefix)

    def _schema(self, db: sqlite3.Connection) -> None:
        docs, fts, vocab, totals = self.docs, self.fts, self.vocab, self.totals
        self.built(
            db,
            "search",
            str(SCHEMA_VERSION),
            f"""
                DROP TABLE IF EXISTS {docs};
                DROP TABLE IF EXISTS {fts};
                DROP TABLE IF EXISTS {vocab};
                DROP TABLE IF EXISTS {totals};
                CREATE TABLE {docs} (id INTEGER PRIMARY KEY, key TEXT UNIQUE, identity TEXT,
                                   length INTEGER);
                CREATE TABLE {totals} (id INTEGER PRIMARY KEY CHECK (id = 1), docs INTEGER,
                                    tokens INTEGER);
                INSERT INTO {totals} VALUES (1, 0, 0);
                CREATE VIRTUAL TABLE {fts} USING fts5(name, description, body,
                    tokenize = 'unicode61 remove_diacritics 0', detail = 'column');
                CREATE VIRTUAL TABLE {vocab} USING fts5vocab({fts}, 'row')
            """,
        )

    def update(self, docs: Iterable[Doc], removed: Iterable[str] = ()) -> None:
        """Add or replace documents and drop removed keys, in one transaction (or as part of
        the one open on the file)."""
        with self.transaction() as db:
            for key in removed:
                self._delete(key)
            # a first build has nothing to replace: no look-up per document
            empty = db.execute(f"SELECT 1 FROM {self.docs} LIMIT 1").fetchone() is None
            added: set[str] = set()
            count = tokens = 0
            for d in docs:
                if not empty or d.key in added:
                    self._delete(d.key)
                added.add(d.key)
                cols = columns_of(d.name, d.description, d.body)
                length = sum(map(len, cols))
                cur = db.execute(
                    f"INSERT INTO {self.docs} (key, identity, length) VALUES (?, ?, ?)",
                    (d.key, d.identity, length),
                )
                db.execute(
                    f"INSERT INTO {self.fts} (rowid, name, description, body) VALUES (?,?,?,?)",
                    (cur.lastrowid, *(" ".join(c) for c in cols)),
                )
                count, tokens = count + 1, tokens + length
            db.execute(
                f"UPDATE {self.totals} SET docs = docs + ?, tokens = tokens + ?", (count, tokens)
            )

    def _delete(self, key: str) -> None:
        db = self.db
        row = db.execute(f"SELECT id, length FROM {self.docs} WHERE key = ?", (key,)).fetchone()
        if row:
            db.execute(f"DELETE FROM {self.fts} WHERE rowid = ?", (row[0],))
            db.execute(f"DELETE FROM {self.docs} WHERE id = ?", (row[0],))
            db.execute(f"UPDATE {self.totals} SET docs = docs - 1, tokens = tokens - ?", (row[1],))

    def sync(
        self,
        current: dict[str, str | None],
        load: Callable[[list[str]], list[Doc]],
        *,
        only: list[str] | None = None,
    ) -> int:
        """Bring the index in line with ``current`` (key -> identity); returns docs re-indexed.

        ``load`` reads the documents whose identity changed. A None identity is always
        re-read (the file changed too recently for its identity to be trusted). With ``only``,
        just those keys are compared (the ones known to have changed); keys among them that
        are not in ``current`` are removed.
        """
        stale, removed = self.compare(current, only)
        if stale or removed:
            self.update(load(stale), removed)
        return len(stale)

    def stats(self, terms: list[str]) -> Stats:
        """Document frequencies of ``terms`` (those present), documents, tokens: what BM25
        scores need; added up over several indexes, they make scores comparable across them."""
        if not terms:
            df: dict[str, int] = {}
        else:
            marks = ",".join("?" * len(terms))
            df = dict(
                self.db.execute(
                    f"SELECT term, doc FROM {self.vocab} WHERE term IN ({marks})", terms
                ).fetchall()
            )
        n_docs, n_tokens = self.db.execute(f"SELECT docs, tokens FROM {self.totals}").fetchone()
        return df, int(n_docs), int(n_tokens)

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        stats: Stats | None = None,
        candidates: int | None = None,
    ) -> list[tuple[str, float]]:
        """The best ``k`` keys for ``query`` with their BM25 scores (higher is better).

        Terms are OR-ed and ranked by BM25 over name, description and body (Lucene's IDF, so
        that tiny stores rank sensibly too). Candidates are the documents matching the most
        informative terms, ranked by the IDF they match; the best of them are then scored with
        every term. Terms found in most documents add little to any score and are left out of
        candidate gathering only, which keeps natural queries fast on large stores; when the
        informative terms find fewer than ``k`` documents, the next rarest terms are added.
        ``stats`` (from ``stats`` of several indexes, summed) scores against a larger corpus;
        ``candidates`` overrides how many documents are scored exactly (this index's share).
        """
        terms = query_terms(query)
        if not terms or k <= 0:
            return []
        weighed = weigh(terms, self.stats, stats)
        if weighed is None:
            return []
        terms, df, idf = weighed.terms, weighed.df, weighed.idf
        cap = max(self.min_postings, self.candidate_share * weighed.n_docs)
        gather = [t for t in terms if df[t] <= cap] or [min(terms, key=lambda t: df[t])]
        matched: dict[int, float] = {}
        rest = sorted((t for t in terms if t not in gather), key=lambda t: df[t])
        for t in gather:
            self._gather(t, idf[t], matched)
        while len(matched) < k and rest:  # too few: widen with the next rarest terms
            t = rest.pop(0)
            self._gather(t, idf[t], matched)
        best = heapq.nlargest(
            max(candidates or self.candidates, k), matched, key=matched.__getitem__
        )
        return self._rescore(best, idf, weighed.avgdl, k)

    def _gather(self, term: str, weight: float, matched: dict[int, float]) -> None:
        for (rowid,) in self.db.execute(
            f"SELECT rowid FROM {self.fts} WHERE {self.fts} MATCH ?", (_phrase(term),)
        ):
            matched[rowid] = matched.get(rowid, 0.0) + weight

    def _rescore(
        self, rowids: list[int], idf: dict[str, float], avgdl: float, k: int
    ) -> list[tuple[str, float]]:
        """BM25 of a few documents: column-weighted presence (a term counts once per column,
        as the index keeps no positions), length-normalised."""
        ids = ",".join(str(r) for r in rowids)
        rows = self.db.execute(
            f"SELECT fts.rowid, docs.key, docs.length, fts.name, fts.description, fts.body"
            f" FROM {self.fts} AS fts JOIN {self.docs} AS docs ON docs.id = fts.rowid"
            f" WHERE fts.rowid IN ({ids})"
        ).fetchall()
        scored = []
        for rowid, key, length, *columns in rows:
            scored.append((-bm25(columns, length, idf, avgdl), rowid, key))
        scored.sort()
        return [(key, -neg) for neg, _, key in scored[:k]]
