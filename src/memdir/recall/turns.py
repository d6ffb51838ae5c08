"""Earlier turns that speak to a question (``episodes_for``): the kept turns of past
conversations ranked by BM25 fused with their embeddings, each with the turn that followed it,
passing a floor of their own (close in meaning, or enough of the question's terms).
This module does NOT keep turns (``episodes``, ``learn.conversation``).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from ..config import Config
from ..errors import MemdirError
from ..scopes import Reader, Scopes
from ..store import Store

if TYPE_CHECKING:
    from ..episodes import Said
    from ..find.embed import Embedder

log = logging.getLogger("memdir.recall")


def named_terms(query: str) -> dict[str, set[str]]:
    """The names the question gives (``asked.names``), each with its full-text terms."""
    from ..find.asked import names
    from ..find.search import tokenize

    given = {n: set(tokenize(n)) for n in names(query)}
    return {n: terms for n, terms in given.items() if terms}


EPISODE_EMBED_SECONDS = 0.5  # a recall embeds turns no extraction embedded for at most this


def episodes_for(store: Reader, query: str, *, meaning: bool = True) -> list[Said]:
    """The kept turns that best match the question, each with the turn that followed it, best
    first: at most ``recall_episodes``; none when episodes are off. Ranked by BM25 fused with
    the turns' embeddings when the configuration has an embedder; a turn must be close in
    meaning by the embedder's bar or hold a third of the question's terms, at least two (its
    only one, for a one-word question) — the terms alone when the question names someone or
    something no kept turn mentions (as the memories' floor does)."""
    from ..episodes import Episodes

    cfg = store.config
    if not cfg.episodes or cfg.recall_episodes <= 0 or not query.strip():
        return []
    stores = [st for _, st in Scopes.of(store).stores()]
    kept = [Episodes(st.internal, cfg) for st in stores if not st.read_only]
    kept = [e for e in kept if e.present()]
    if not kept:  # nothing was said yet: no embedder is loaded for nothing
        return []
    embedder = None
    if meaning:
        with Scopes.of(store).held():
            embedder = _episode_embedder(cfg, query, stores)
    given = named_terms(query)
    wanted = sorted(set().union(*given.values()))
    known: set[str] = set()
    found: list[Said] = []
    for episodes in kept:
        try:
            k = cfg.recall_episodes * 2
            try:
                found += episodes.search(
                    query,
                    k,
                    embedder=embedder,
                    budget=min(cfg.embed_budget, EPISODE_EMBED_SECONDS),
                    following=cfg.recall_episode_after,
                    preceding=cfg.recall_episode_before,
                )
            except MemdirError as exc:  # the embedder failed: BM25 alone
                log.warning("episode search without embeddings: %s", exc)
                found += episodes.search(
                    query,
                    k,
                    following=cfg.recall_episode_after,
                    preceding=cfg.recall_episode_before,
                )
            if wanted:
                known |= episodes.mentioned(wanted)
        finally:
            episodes.close()
    unknown = any(not terms <= known for terms in given.values())
    good = [e for e in found if (e.close and not unknown) or _enough(e)]
    good.sort(key=lambda e: -e.score)
    return good[: cfg.recall_episodes]


def _enough(said: Said) -> bool:
    """Whether a turn holds enough of the question's terms to be evidence on its own: a
    third of them, at least two (a long chat turn shares two common words with many a
    prompt), all of them for a question of one."""
    return said.matched >= min(max(2, math.ceil(said.asked / 3)), said.asked)


def _episode_embedder(cfg: Config, query: str, stores: list[Store]) -> Embedder | None:
    """The embedder for ranking episodes: the one a store was given or has made, else the
    configuration's; None when there is none, it cannot be made, or it does not read the
    question's language."""
    from ..find.embed import from_config, reads

    try:
        given = [st.index.ranker().embedder for st in stores]
        embedder = next((e for e in given if e is not None), None) or from_config(cfg)
    except MemdirError as exc:
        log.warning("episode search without embeddings: %s", exc)
        return None
    return embedder if embedder is not None and reads(embedder, query) else None
