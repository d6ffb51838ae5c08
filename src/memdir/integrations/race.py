"""The prompt hook's race: the memory model's choice against search's, within the hook's
budget (``race``). The model gets its share of the budget; search runs meanwhile, by full text
first and then by meaning, so a late model, a cold embedder or a failure still leaves an
answer, and the recall log says why. Also the memory model a hook or a learn job makes
(``memory_model``, ``model_or_why``).
This module does NOT render or log recall (``hooks``).
"""

from __future__ import annotations

import dataclasses
import time
from concurrent import futures
from pathlib import Path
from typing import Any

from ..config import Config
from ..disk.layout import USAGE
from ..errors import LLMUnavailable, MemdirError
from ..gate.safetext import one_line
from ..providers import Message
from ..scopes import Scopes
from .hostsettings import HOSTS
from .lease import Lease


class HookError(MemdirError):
    """The event could not be used, or recall could not answer in time; the hook says why
    and exits 0."""


def memory_model(config: Config, host: str | None, usage: Path | None = None) -> Any:
    """The configured memory model; without one, the host's own CLI; else None. Its calls
    are logged in ``usage`` (the store's usage log: ``memdir llm stats``)."""
    return model_or_why(config, host, usage)[0]


def model_or_why(config: Config, host: str | None, usage: Path | None = None) -> tuple[Any, str]:
    """The memory model (``memory_model``), or None and why there is none (a key without its
    SDK names the extra to install)."""
    from ..providers import make_model

    tried = [config]
    if host in HOSTS and config.provider is None:  # (then the host's own CLI)
        tried.append(Config(**{**config.__dict__, "provider": host}))
    whys = []
    for each in tried:
        try:
            return make_model(each, memory=True, usage_log=usage), ""
        except LLMUnavailable as exc:
            whys.append(str(exc))
    return None, whys[0] if "pip install" in whys[0] else whys[-1]


def usage_of(scopes: Scopes) -> Path | None:
    """Where the model calls a hook makes for these stores are logged: the usage log of the
    store written here (``Scopes.home``)."""
    home = scopes.home()
    return None if home is None else home.internal / USAGE


SEARCH_GRACE = 3.0  # seconds search may take past the model's budget before recall is skipped


def race(
    config: Config,
    lease: Lease,
    messages: list[Message],
    budget: float,
    started: float,
) -> Any:
    """The memory model's selection if it answers within ``budget`` seconds of ``started``,
    else search's (run meanwhile, in ``lease``'s stores), saying the model was late or why
    it failed. Search finds by full text first (milliseconds), then by meaning too: past
    ``budget + SEARCH_GRACE`` the full text's answer is recalled, and only when even that
    is not ready, HookError. Each side holds its share of the lease while it runs, so a
    side that outlives the answer keeps the stores until it ends."""
    from ..recall import select

    def choose() -> Any:  # a host CLI is too slow here: only a configured model
        with lease.shared() as scopes:
            if not scopes.entries():
                return None  # nothing to choose from: no model client is made (its SDK loaded)
            model = memory_model(config, None, usage_of(scopes))
            if model is None:
                return None
            # the same stores as search's, one reader at a time
            return select(scopes, messages, model, max_items=config.recall_max_items)

    words: list[Any] = []  # full text's selection, while the question is being embedded

    def search() -> Any:
        with lease.shared() as scopes:
            found = select(scopes, messages, None, max_items=config.recall_max_items, meaning=False)
            words.append(found)
            _embed_question(config, messages)  # (no store is read meanwhile)
            words.clear()  # from here the stores are read: a late answer is not waited for
            return select(scopes, messages, None, max_items=config.recall_max_items)

    def left(until: float) -> float:
        return max(0.0, until - (time.monotonic() - started))

    asks_model = budget > 0 and config.recall_select != "search"  # (no client made for nothing)
    pool = futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="memdir-recall")
    try:
        picker = pool.submit(choose) if asks_model else None
        finder = pool.submit(search)
    finally:
        pool.shutdown(wait=False)  # nobody waits for a late side: it ends on its own
    if picker is not None:
        # the model gets ``hook_model_wait`` of the budget (or until search answers, if that
        # is later), never the whole of it: search's hits go in rather than a long wait
        futures.wait([picker], timeout=left(min(budget, max(budget * config.hook_model_wait, 0))))
        if not picker.done():
            futures.wait([finder], timeout=left(budget))
            futures.wait([picker], timeout=0.0 if not finder.done() else 0.05)
    given = time.monotonic() - started
    why_not: str | None = None  # why the model's choice is not used
    if picker is not None and picker.done():
        failed = picker.exception()
        if failed is None and picker.result() is not None:
            return picker.result()
        if failed is not None:
            why_not = f"the memory model failed ({one_line(str(failed))[:200]}); used search"
    elif picker is not None:
        why_not = (
            f"the memory model did not answer in the {given:.1f} s it was given"
            f" (of the hook's {budget:g} s); used search"
        )
    futures.wait([finder], timeout=left(budget + SEARCH_GRACE))
    if not finder.done() and words:  # (still embedding the question: no store is held)
        late = f"embedding the question took over {budget + SEARCH_GRACE:.0f} s; used full text"
        return dataclasses.replace(words[0], note="; ".join(filter(None, [why_not, late])))
    if not finder.done():
        raise HookError(
            f"recall took over {budget + SEARCH_GRACE:.0f} s and was skipped —"
            " run 'memdir index' (and 'memdir doctor') in this project"
        )
    found = finder.result()  # (search's own failure is raised here, said as every hook's is)
    if why_not is not None:
        return dataclasses.replace(found, path="search-fallback", note=why_not)
    return found


def _embed_question(config: Config, messages: list[Message]) -> None:
    """The prompt's vector made (and kept by ``embed.query_vector``) before search reads the
    stores by meaning, when that costs no model load: the embedder this process has loaded
    already (the resident's), or an endpoint's (``embedder = "http"``). A slow embedder then
    holds up no reader of the stores. A model not loaded yet is left to search, which loads
    it only when the stores are embedded enough to rank by meaning."""
    from ..find.embed import from_config, loaded, query_vector, reads
    from ..recall import search_query

    try:
        embedder = loaded(config) or (from_config(config) if config.embedder == "http" else None)
    except MemdirError:  # the same error is search's to say (it ranks by full text then)
        return
    query = search_query(messages)
    if embedder is not None and query.strip() and reads(embedder, query):
        query_vector(embedder, query)
