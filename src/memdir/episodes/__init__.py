"""Episodes: what was actually said, kept beside the memories extracted from it.

Every conversation memdir learns from (its agent, the hooks, ``memdir extract``) is kept as
dated turns — a user message with the replies that followed it — in
``<state>/episodes/<date>-<conversation>.jsonl``, one JSON line per turn: when it was said,
who spoke, the text (credentials redacted as for memories). They are never listed in
MEMORY.md, never committed by sync (the state folder is outside the store), and a person
reads or deletes them as plain files. Their full-text index and their vectors are parts of the
store's index (``<state>/index.sqlite``, tables ``episode_*``: a cache rebuilt from the
files) and let recall find the turns a question is about; what a person deleted is deleted
from there too, its pages overwritten (SQLite's ``secure_delete``).
``episodes = false`` turns them off; files last written more than ``episodes_keep_days`` ago
go, and the oldest go first past ``episodes_max_bytes``.
This module does NOT choose what to recall (``recall`` does) and knows nothing of models.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import re
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..disk.atomic import append_nofollow, write_atomic
from ..disk.layout import INDEX_DB
from ..find import periods
from ..find.cachedb import damaged
from ..find.search import Doc, SearchIndex, tokenize
from ..gate.instructions import screen as screen_instructions
from ..gate.safetext import speaker_turn
from ..gate.secrets import redact
from .amends import amended, amending
from .made import Made

if TYPE_CHECKING:
    from ..find.embed import Embedder
    from ..find.vectors import VectorIndex

log = logging.getLogger("memdir")

FOLDER = "episodes"
PREFIX = "episode_"  # of the episodes' tables in the store's index
TEXT, VECTORS = "text", "vectors"  # the parts that note which files they were made from
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
    replaces: str = ""  # when what it amends was said (that turn is never recalled again)


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
        self.internal = internal
        self.folder = internal / FOLDER
        self.index_path = internal / INDEX_DB
        self.config = config
        self._made: Made | None = None
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
        try:
            indexed = self._made_of().of(TEXT)
            current = indexed == self._sizes() and not self._search().rebuilt
        except sqlite3.Error as exc:  # the index is a cache: the next search rebuilds it
            log.warning("memdir: the episodes' index could not be read (%s)", exc)
            indexed, current = {}, False
        if not path.exists():  # owner-only: what people said
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o600))
        append_nofollow(path, ("\n".join(lines) + "\n").encode())
        if current:  # up to date before these turns: still is, with them
            try:
                with self._made_of().transaction():
                    self._search().update(docs)
                    self._made_of().note(TEXT, {**indexed, fname: path.stat().st_size})
            except sqlite3.Error as exc:
                log.warning("memdir: the episodes' index was not updated (%s)", exc)
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

            def hold(rec: dict[str, Any], numbers: set[int] = numbers) -> bool:
                if int(rec["n"]) not in numbers or rec.get("held"):
                    return False
                rec["held"] = why
                return True

            marked += self._change(name, hold)
        return marked

    def amend(self, refs: Sequence[str]) -> list[str]:
        """Of the new turns ``refs``, each whose user says an earlier decision changed ("from
        now on", "instead", "we changed our mind"…) marks the closest earlier turn that decided
        the same thing (``amended``) as replaced: kept, never recalled again, and the new turn
        says when what it replaces was said. The refs marked."""
        new = set(refs)
        files = {ref.partition("#")[0] for ref in refs}
        mine = {t.ref: t for name in files for t in self._turns_in(name) if t.ref in new}
        marked: list[str] = []
        for ref in refs:
            turn = mine.get(ref)
            says = amending(turn.text) if turn is not None else ""
            if turn is None or turn.held or not says:
                continue
            found = [
                said.turn
                for said in self.search(says, 5)
                if said.turn.ref not in new and said.turn.said <= turn.said
            ]
            gone = [t for t in found if amended(t.text, turn.text)][:1]  # the closest decision
            if not gone:
                continue
            self.supersede([t.ref for t in gone], f"replaced by {ref} ({turn.said[:10]})")
            self._note(ref, "replaces", min(t.said for t in gone))
            marked += [t.ref for t in gone]
        return marked

    def _note(self, ref: str, key: str, value: str) -> None:
        """Set ``key`` on the kept turn ``ref``."""
        name, _, n = ref.partition("#")

        def note(rec: dict[str, Any]) -> bool:
            if int(rec["n"]) != int(n):
                return False
            rec[key] = value
            return True

        self._change(name, note)

    def _change(self, name: str, change: Callable[[dict[str, Any]], bool]) -> int:
        """Write the kept turns of the file ``name`` again with ``change`` applied to each
        (True: it changed the turn); a torn or hand-edited line stays as it is. How many
        changed."""
        path = self.folder / name
        if not path.is_file():
            return 0
        out, changed = [], 0
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
                if change(rec):
                    line, changed = json.dumps(rec), changed + 1
            except (ValueError, KeyError, TypeError):
                pass  # a torn or hand-edited line stays as it is
            out.append(line)
        write_atomic(path, ("\n".join(out) + "\n").encode(), mode=0o600)
        return changed

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
        if gone:  # the next search indexes the rest anew (and embeds only what is new)
            self._forget(vectors=False)
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
                        str(rec.get("replaces") or ""),
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
        earlier span is not repeated. A damaged index is rebuilt from the
        files; when a person deleted the folder, what the index held of it goes too."""
        if not self.enabled or not self.present():
            return []
        try:
            return self._find(query, k, embedder, budget, following, preceding)
        except sqlite3.DatabaseError as exc:
            if not damaged(exc):
                raise
            log.warning("memdir: the index in %s was damaged (%s); rebuilt", self.internal, exc)
            made = self._made_of()
            self.close()
            made.discard()
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
        index, made = self._search(), self._made_of()
        if index.rebuilt or made.of(TEXT) != sizes:
            # files written elsewhere, deleted or edited by hand; or the index was lost
            with made.transaction():
                index.reset()
                index.update(Doc(t.ref, t.ref, "", "", t.text) for t in self.turns())
                made.note(TEXT, sizes)
            index.rebuilt = False
        period, wide = periods.widened(query, k)
        ranked: list[tuple[str, float, bool]]
        if embedder is None:
            ranked = [(ref, score, False) for ref, score in index.search(query, wide)]
        else:
            from ..find.vectors import hybrid

            vectors = self._embedded(embedder, sizes, budget)
            bm25 = index.search(query, max(k, CANDIDATES))
            ranked = [
                (str(r.key), r.score, r.close)
                for r in hybrid(embedder, query, bm25, lambda q: [vectors.cosines(q)], wide * 2)
            ]
        if period is not None:
            ranked = periods.turns_in_period_first(ranked, period)[: k * 2]
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
        """Whether any episodes are kept; when a person deleted the folder, what the index
        held of it is deleted too."""
        if self.folder.is_dir():
            return True
        if self.index_path.is_file() and self._made_of().any():
            self._forget()
        return False

    def mentioned(self, terms: list[str]) -> set[str]:
        """Which of these full-text terms some kept turn holds (as the last ``search`` left
        the index)."""
        return set(self._search().stats(terms)[0])

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

        from ..find.vectors import Text, VectorIndex

        made = self._made_of()
        if self._vectors is None or self._vectors.embedder is not embedder:
            self._vectors = VectorIndex(self.index_path, embedder, shared=made, prefix=PREFIX)
        done = {} if self._vectors.rebuilt else made.of(VECTORS)
        # (a new, damaged or reset part holds none of what the note says)
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
            made.note(VECTORS, sizes)
            self._vectors.rebuilt = False
        return self._vectors

    def _made_of(self) -> Made:
        """The episodes' note of what their parts were made from, in the store's index (the
        connection the parts share)."""
        if self._made is None:
            self._made = Made(self.index_path, prefix=PREFIX)
            self._made.db.execute("PRAGMA secure_delete = ON")  # what is deleted is gone
        return self._made

    def _search(self) -> SearchIndex:
        if self._index is None:
            self._index = SearchIndex(shared=self._made_of(), prefix=PREFIX)
        return self._index

    def _forget(self, *, vectors: bool = True) -> None:
        """Empty the episodes' full-text part of the index, and their ``vectors`` (files they
        were made from are gone): the deleted text is overwritten, and out of SQLite's log as
        well. (The vectors of a file that went, kept, are dropped at the next embedding.)"""
        made = self._made_of()
        with made.transaction() as db:
            self._search().reset()
            made.note(TEXT, {})
            if vectors:  # of whichever embedder made them: made anew when next asked for
                made.note(VECTORS, {})
                db.execute(f"DROP TABLE IF EXISTS {PREFIX}vecs")
                db.execute(f"DROP TABLE IF EXISTS {PREFIX}vec_docs")
                db.execute("DELETE FROM meta WHERE key = ?", (f"{PREFIX}vectors",))
                self._vectors = None
        made.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        if self._made is not None:
            self._made.close()
        self._made = self._index = self._vectors = None


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
