"""Episodes: what was actually said, kept beside the memories extracted from it.

Every conversation memdir learns from (its agent, the hooks, ``memdir extract``) is kept as
dated turns — a user message with the replies that followed it — in
``<state>/episodes/<date>-<conversation>.jsonl``, one JSON line per turn: when it was said,
who spoke, the text (credentials redacted as for memories). They are never listed in
MEMORY.md, never committed by sync (the state folder is outside the store), and a person
reads or deletes them as plain files. A full-text index (``<state>/episodes.sqlite``, a
cache rebuilt from the files) lets recall find the turns a question is about.
``episodes = false`` turns them off; files last written more than ``episodes_keep_days`` ago
go, and the oldest go first past ``episodes_max_bytes``.
This module does NOT choose what to recall (``recall`` does) and knows nothing of models.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import periods
from .atomic import append_nofollow, write_atomic
from .cachedb import damaged
from .config import Config
from .instructions import screen as screen_instructions
from .periods import Period
from .safetext import speaker_turn
from .search import Doc, SearchIndex, tokenize
from .secrets import redact

if TYPE_CHECKING:
    from .embed import Embedder
    from .vectors import VectorIndex

FOLDER = "episodes"
INDEX = "episodes.sqlite"
SIGNATURE = "episodes.json"  # the files and sizes the index holds
VECTORS = "episodes-vectors.sqlite"  # the turns' embeddings, a cache like the index
VECTORS_SIGNATURE = "episodes-vectors.json"  # the files and sizes every vector is made for
CANDIDATES = 20  # BM25 hits fused with the nearest vectors
MAX_TURN_CHARS = 4000  # of one turn's text kept (a pasted log is not a conversation)
_FILE = re.compile(r"\d{4}-\d{2}-\d{2}-[0-9a-f]{1,32}\.jsonl")


@dataclass(frozen=True)
class Turn:
    """One kept turn: where it is (``file#n``), when it was said, who spoke, what was said."""

    ref: str
    said: str
    who: tuple[str, ...]
    text: str
    held: str = ""  # why it is never recalled (it reads as an instruction to an agent)


@dataclass(frozen=True)
class Said:
    """A turn a search found (with the turns after it that came along), its score (BM25, or
    fused with the embedding's cosine), how many of the question's terms it has, and whether
    it is close in meaning by the embedder's own bar."""

    turn: Turn
    score: float
    matched: int
    asked: int
    close: bool = False


class Episodes:
    """The episodes of one store (kept in its state folder)."""

    def __init__(self, internal: Path, config: Config) -> None:
        self.folder = internal / FOLDER
        self.index_path = internal / INDEX
        self.signature_path = internal / SIGNATURE
        self.vectors_path = internal / VECTORS
        self.vectors_signature_path = internal / VECTORS_SIGNATURE
        self.config = config
        self._index: SearchIndex | None = None
        self._vectors: VectorIndex | None = None

    @property
    def enabled(self) -> bool:
        return self.config.episodes

    # -- writing -------------------------------------------------------------------------------

    def record(
        self,
        messages: Sequence[tuple[str, str]],
        *,
        conversation: str,
        said_at: str | None = None,
    ) -> list[str]:
        """Keep ``(role, text)`` messages as turns of ``conversation``; their refs. A turn
        starts at each user message; ``said_at``: when it was said (else now)."""
        if not self.enabled or not messages:
            return []
        said = said_at or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        turns: list[list[tuple[str, str]]] = []
        for role, text in messages:
            if not text.strip() or role not in ("user", "assistant"):
                continue
            if role == "user" or not turns:
                turns.append([])
            turns[-1].append((role, text.strip()))
        if not turns:
            return []
        key = re.sub(r"[^0-9a-f]", "", conversation.lower())[:32] or "0"
        fname = f"{said[:10]}-{key}.jsonl"
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.folder / fname
        n = _count_lines(path)
        refs, docs, lines = [], [], []
        for i, turn in enumerate(turns, n):
            text = "\n".join(speaker_turn(role, words) for role, words in turn)[:MAX_TURN_CHARS]
            text, _ = redact(text)
            who = tuple(dict.fromkeys(role for role, _ in turn))
            ref = f"{fname}#{i}"
            refs.append(ref)
            rec: dict[str, object] = {"n": i, "said": said, "who": list(who), "text": text}
            order = screen_instructions(text)
            if order is not None:  # kept, as said, but never shown to a model again
                rec["held"] = order
            lines.append(json.dumps(rec))
            docs.append(Doc(ref, ref, "", "", text))
        indexed = self._indexed()
        current = indexed is not None and indexed == self._sizes()
        if not path.exists():  # owner-only: what people said
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o600))
        append_nofollow(path, ("\n".join(lines) + "\n").encode())
        with contextlib.suppress(Exception):  # the index is a cache: rebuilt when next read
            index = self._search()
            current = current and not index.rebuilt
            index.update(docs)
            if current and indexed is not None:  # up to date before these turns: still is
                self._note_indexed({**indexed, fname: path.stat().st_size})
        self.prune()
        return refs

    def supersede(self, refs: Sequence[str], why: str) -> int:
        """Keep the turns ``refs`` (``file#n``) but never recall them again: what they said was
        corrected since (``why``: by which memory). How many were marked."""
        wanted: dict[str, set[int]] = {}
        for ref in refs:
            name, _, n = ref.partition("#")
            if _FILE.fullmatch(name) and n.isdigit():
                wanted.setdefault(name, set()).add(int(n))
        marked = 0
        for name, numbers in wanted.items():
            path = self.folder / name
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except FileNotFoundError:
                continue
            out = []
            for line in lines:
                try:
                    rec = json.loads(line)
                    if int(rec["n"]) in numbers and not rec.get("held"):
                        rec["held"] = why
                        line = json.dumps(rec)
                        marked += 1
                except (ValueError, KeyError, TypeError):
                    pass  # a torn or hand-edited line stays as it is
                out.append(line)
            write_atomic(path, ("\n".join(out) + "\n").encode(), mode=0o600)
        return marked

    def prune(self) -> int:
        """Drop episode files past ``episodes_keep_days``, then the oldest past the size cap;
        how many went."""
        if not self.folder.is_dir():
            return 0
        # by when they were kept (a transcript of last year, learned today, stays its days)
        files = sorted(
            (p for p in self.folder.iterdir() if _FILE.fullmatch(p.name)),
            key=lambda p: p.stat().st_mtime,
        )
        cutoff = time.time() - self.config.episodes_keep_days * 86400
        gone = [p for p in files if p.stat().st_mtime < cutoff]
        kept = [p for p in files if p not in gone]
        total = sum(p.stat().st_size for p in kept)
        while kept and total > self.config.episodes_max_bytes:
            oldest = kept.pop(0)
            total -= oldest.stat().st_size
            gone.append(oldest)
        for path in gone:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        if gone:
            self._drop_index()
        return len(gone)

    # -- reading -------------------------------------------------------------------------------

    def turns(self) -> list[Turn]:
        """Every kept turn, oldest file first."""
        return [t for name in sorted(self._sizes()) for t in self._turns_in(name)]

    def _sizes(self) -> dict[str, int]:
        """The episode files and their sizes (what the index was built from, when current)."""
        if not self.folder.is_dir():
            return {}
        return {p.name: p.stat().st_size for p in self.folder.iterdir() if _FILE.fullmatch(p.name)}

    def _indexed(self) -> dict[str, int] | None:
        """The files and sizes the index was last brought up to date with."""
        return _read_sizes(self.signature_path)

    def _turns_in(self, name: str) -> list[Turn]:
        out: list[Turn] = []
        path = self.folder / name
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            return out
        for line in lines:
            try:
                rec = json.loads(line)
                out.append(
                    Turn(
                        f"{name}#{int(rec['n'])}",
                        str(rec["said"]),
                        tuple(str(w) for w in rec["who"]),
                        str(rec["text"]),
                        str(rec.get("held") or ""),
                    )
                )
            except (ValueError, KeyError, TypeError):
                continue  # a torn or hand-edited line
        return out

    def search(
        self,
        query: str,
        k: int = 3,
        *,
        embedder: Embedder | None = None,
        budget: float | None = None,
        following: int = 0,
        preceding: int = 0,
    ) -> list[Said]:
        """The ``k`` turns that best match ``query``, with how much of it they hold: BM25, fused
        with the turns' embeddings when ``embedder`` is given (turns not yet embedded are made
        so within ``budget`` seconds; the rest rank by BM25 until a later search). Each comes
        with the ``following`` turns said after it (the answer to what was asked) and the
        ``preceding`` ones before it (what it answers), as one span; a turn already in an
        earlier span is not repeated. A damaged cache is rebuilt from the
        files; when a person deleted the folder, the caches of what it held go too."""
        if not self.enabled or not self.present():
            return []
        try:
            return self._find(query, k, embedder, budget, following, preceding)
        except sqlite3.DatabaseError as exc:
            if not damaged(exc):
                raise
            self._drop_index()
            self._drop_vectors()
            return self._find(query, k, embedder, budget, following, preceding)

    def _find(
        self,
        query: str,
        k: int,
        embedder: Embedder | None,
        budget: float | None,
        following: int,
        preceding: int = 0,
    ) -> list[Said]:
        asked = set(tokenize(query))
        if not asked:
            return []
        sizes = self._sizes()
        index = self._search()
        if index.rebuilt or self._indexed() != sizes:
            # files written elsewhere, deleted or edited by hand; or the cache was lost
            self._drop_index()
            index = self._search()
            index.update(Doc(t.ref, t.ref, "", "", t.text) for t in self.turns())
            self._note_indexed(sizes)
            index.rebuilt = False
        period, wide = periods.widened(query, k)
        ranked: list[tuple[str, float, bool]]
        if embedder is None:
            ranked = [(ref, score, False) for ref, score in index.search(query, wide)]
        else:
            from .vectors import hybrid

            vectors = self._embedded(embedder, sizes, budget)
            bm25 = index.search(query, max(k, CANDIDATES))
            ranked = [
                (str(r.key), r.score, r.close)
                for r in hybrid(embedder, query, bm25, lambda q: [vectors.cosines(q)], wide * 2)
            ]
        if period is not None:
            ranked = _in_period_first(ranked, period)[: k * 2]
        names = {ref.split("#")[0] for ref, _, _ in ranked}
        by_ref = {t.ref: t for name in names for t in self._turns_in(name)}
        # only the files that hold a hit are read
        out: list[Said] = []
        taken: set[str] = set()
        for ref, score, close in ranked:
            turn = by_ref.get(ref)
            if turn is None or turn.held or ref in taken or len(out) == k:
                continue
            matched = len(asked & set(tokenize(turn.text)))
            span = [turn]
            name, n = ref.split("#")
            for i in range(int(n) - 1, int(n) - 1 - preceding, -1):
                before = by_ref.get(f"{name}#{i}")
                if before is None or before.held or before.ref in taken:
                    break
                span.insert(0, before)
            for i in range(int(n) + 1, int(n) + 1 + following):
                after = by_ref.get(f"{name}#{i}")
                if after is None or after.held or after.ref in taken:
                    break
                span.append(after)
            taken.update(t.ref for t in span)
            out.append(Said(_joined(span), score, matched, len(asked), close))
        return out

    def present(self) -> bool:
        """Whether any episodes are kept; when a person deleted the folder, the caches of what
        it held are deleted too."""
        if self.folder.is_dir():
            return True
        if self.index_path.exists() or self.vectors_path.exists():
            self._drop_index()
            self._drop_vectors()
        return False

    def embed(self, embedder: Embedder, budget: float | None = None) -> None:
        """Embed the turns that have no vector yet (within ``budget`` seconds, if given), so
        that a recall need not."""
        if self.enabled and self.present():
            self._embedded(embedder, self._sizes(), budget)

    def _embedded(
        self, embedder: Embedder, sizes: dict[str, int], budget: float | None
    ) -> VectorIndex:
        """The turns' vectors, brought up to date with the files (only the files that grew
        are read, unless one went or shrank) within ``budget`` seconds."""
        import hashlib

        from .vectors import Text, VectorIndex

        if self._vectors is None:
            self._vectors = VectorIndex(self.vectors_path, embedder)
        done = _read_sizes(self.vectors_signature_path)
        if done is None or self._vectors.rebuilt:
            done = {}  # (a new, damaged or reset cache holds none of what the file says)
        if done == sizes:
            return self._vectors
        whole = any(name not in sizes or sizes[name] < size for name, size in done.items())
        files = sorted(sizes) if whole else [n for n in sorted(sizes) if done.get(n) != sizes[n]]
        texts = {t.ref: t.text for name in files for t in self._turns_in(name)}
        current: dict[str, str | None] = {
            ref: hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
            for ref, text in texts.items()
        }
        left = self._vectors.sync(
            current,
            lambda stale: [Text(ref, current[ref], texts[ref]) for ref in stale],
            only=None if whole else list(current),
            budget=budget,
        )
        if whole:  # what was said in a file that went is not kept as a vector either
            self._vectors.forget_unused()
        if not left:
            _write_sizes(self.vectors_signature_path, sizes)
            self._vectors.rebuilt = False
        return self._vectors

    def _search(self) -> SearchIndex:
        if self._index is None:
            self._index = SearchIndex(self.index_path)
        return self._index

    def _note_indexed(self, sizes: dict[str, int]) -> None:
        _write_sizes(self.signature_path, sizes)

    def _drop_index(self) -> None:
        self._close_index()
        _unlink(self.index_path, self.signature_path)

    def _drop_vectors(self) -> None:
        self._close_vectors()
        _unlink(self.vectors_path, self.vectors_signature_path)

    def _close_index(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    def _close_vectors(self) -> None:
        if self._vectors is not None:
            self._vectors.close()
            self._vectors = None

    def close(self) -> None:
        self._close_index()
        self._close_vectors()


def _read_sizes(path: Path) -> dict[str, int] | None:
    """The files and sizes a cache notes it was made from (None: no note, or unreadable)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_sizes(path: Path, sizes: dict[str, int]) -> None:
    write_atomic(path, json.dumps(sizes).encode(), sync=False)


def _unlink(*paths: Path) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _in_period_first(
    ranked: list[tuple[str, float, bool]], period: Period
) -> list[tuple[str, float, bool]]:
    """The hits said in the period the question names weigh more (``periods.weight``); a
    file's name starts with the day its turns were said."""
    out = [(ref, score * periods.weight(period, ref[:10]), close) for ref, score, close in ranked]
    out.sort(key=lambda r: (-r[1], r[0]))
    return out


def _joined(span: list[Turn]) -> Turn:
    """Consecutive turns of one file as one (``file#a-b``)."""
    if len(span) == 1:
        return span[0]
    first, last = span[0], span[-1]
    return Turn(
        f"{first.ref}-{last.ref.split('#')[1]}",
        first.said,
        tuple(dict.fromkeys(w for t in span for w in t.who)),
        "\n".join(t.text for t in span),
    )


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as fh:
            return sum(1 for _ in fh)
    except FileNotFoundError:
        return 0
