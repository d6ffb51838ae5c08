"""Choosing the memories (and the earlier turns) that matter now.

``select`` shows the memory model only the catalogue (names, types, descriptions) and the
recent conversation, and validates its choice; search is the fallback when the model fails and
the method when none is configured. ``episodes_for`` finds what was said in earlier
conversations; ``load_memories`` chooses and renders in one call; ``log_recall`` records what
was recalled. Every function takes ``Scopes`` (a single store is read as a scope of one).
This module does NOT render the block (``block``) and does NOT write memories.
"""

from __future__ import annotations

import logging
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import prompts
from ..entry import Entry, Hit
from ..errors import LLMError, MemdirError
from ..gate.safetext import for_body, for_prompt, speaker_turn
from ..policy import Policy, shown
from ..providers import ChatModel, Message, complete_json, runs_locally
from ..scopes import Reader, Scopes
from .block import estimate_tokens, render_block
from .turns import episodes_for, named_terms

if TYPE_CHECKING:
    from ..config import Config
    from ..episodes import Said
    from ..providers import JSONSchema

log = logging.getLogger("memdir.recall")
# The reply shapes of DESIGN.md, for endpoints that enforce a JSON schema.
SELECT_SCHEMA: JSONSchema = {
    "type": "object",
    "required": ["selected"],
    "properties": {"selected": {"type": "array", "items": {"type": "string"}}},
}


@dataclass
class Selection:
    """What was chosen, how, and from which candidates (for ``memdir recall --explain``)."""

    names: list[str]
    path: str  # "llm", "search" (no model), or "search-fallback" (the model failed)
    candidates: list[tuple[str, float | None]] = field(default_factory=list)
    note: str = ""
    episodes: list[Said] = field(default_factory=list)  # what was said, found by search

    def to_dict(self) -> dict[str, object]:
        """The selection as JSON-able data."""
        return {
            "selected": self.names,
            "path": self.path,
            "note": self.note,
            "candidates": [{"name": n, "score": s} for n, s in self.candidates],
            "episodes": [
                {"ref": e.turn.ref, "said": e.turn.said, "score": round(e.score, 4)}
                for e in self.episodes
            ],
        }


def message_text(message: Message) -> str:
    """The text a person would read in a message (tool calls and results summarised)."""
    content = message.get("content", "")
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind == "tool_use":
            parts.append(f"[called {block.get('name')}]")
        elif kind == "tool_result":
            parts.append("[tool result]")
    return "\n".join(p for p in parts if p)


def recent_conversation(messages: list[Message], max_chars: int) -> str:
    """The latest messages as 'role: text' lines, newest kept whole, within ``max_chars``."""
    lines: list[str] = []
    used = 0
    for msg in reversed(messages):
        text = message_text(msg).strip()
        if not text:
            continue
        line = speaker_turn(str(msg.get("role", "user")), text)
        if used + len(line) > max_chars:
            if not lines:
                lines.append(line[-max_chars:])
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(reversed(lines))


MAX_QUERY_CHARS = 2000  # what search looks at of the conversation: its latest words


def search_query(messages: list[Message]) -> str:
    """Search text: the latest user message, with the one before it for context."""
    users = [message_text(m) for m in messages if m.get("role") == "user"]
    users = [u for u in users if u.strip() and u.strip() != "[tool result]"]
    return "\n".join(users[-2:])[-MAX_QUERY_CHARS:]  # a pasted file is not a question


def catalogue_for(store: Reader, query: str, limit: int) -> list[Entry]:
    """Every memory when they fit the prompt; else pinned ones plus the best search hits."""
    entries = store.entries()
    if len(entries) <= limit:
        return entries
    pinned = [e for e in entries if e.pinned]
    hits = [h.entry for h in store.search(query, limit)] if query.strip() else []
    seen: set[str] = set()
    out: list[Entry] = []
    for e in [*pinned, *hits, *sorted(entries, key=lambda e: e.updated or "", reverse=True)]:
        if e.name not in seen and len(out) < limit:
            seen.add(e.name)
            out.append(e)
    return out


def _validator(catalogue: list[Entry], max_items: int) -> Any:
    names = [e.name for e in catalogue]
    known = set(names)

    def validate(value: Any) -> list[str]:
        if isinstance(value, dict):
            if "selected" not in value:
                raise ValueError('the object has no "selected" key')
            value = value["selected"]
        if isinstance(value, (str, int)):
            value = [value]
        if not isinstance(value, list):
            raise ValueError('"selected" must be a list of memory names')
        chosen: list[str] = []
        for item in value:
            if isinstance(item, dict):
                item = item.get("name")
            name: str | None = None
            if isinstance(item, bool):
                continue
            if isinstance(item, int) or (isinstance(item, str) and item.strip().isdigit()):
                pos = int(item)
                name = names[pos - 1] if 1 <= pos <= len(names) else None
            elif isinstance(item, str):
                norm = unicodedata.normalize("NFC", item.strip())
                name = norm if norm in known else None
            if name is None:
                log.info("select: dropped unknown memory %r from the model's answer", item)
            elif name not in chosen:
                chosen.append(name)
        return chosen[:max_items]

    return validate


def select(
    store: Reader,
    messages: list[Message],
    model: ChatModel | None = None,
    *,
    max_items: int = 5,
    meaning: bool = True,
) -> Selection:
    """Choose up to ``max_items`` memory names for the conversation, saying how, and the
    turns of earlier conversations (episodes) that speak to it; by full text alone (no
    embedder loaded or asked) when not ``meaning``."""
    store = Scopes.of(store)
    sel = _select(store, messages, model, max_items=max_items, meaning=meaning)
    sel.episodes = episodes_for(store, search_query(messages), meaning=meaning)
    return sel


def _select(
    store: Scopes,
    messages: list[Message],
    model: ChatModel | None = None,
    *,
    max_items: int = 5,
    meaning: bool = True,
) -> Selection:
    cfg = store.config
    query = search_query(messages)
    why = "no model configured"
    if cfg.recall_select == "search":  # a model given or not: search is the method asked for
        model, why = None, "recall_select = search"
    if not store.entries():
        return Selection([], "search" if model is None else "llm", note="the store is empty")
    if model is not None:  # what no model is shown, the memory model neither
        catalogue = Policy(store).catalogue(catalogue_for(store, query, cfg.select_catalogue_max))
        lines = "\n".join(
            f"{i}. {e.name} ({for_prompt(e.type)}{_scope_tag(store, e)}) —"
            f" {for_prompt(e.description)}"
            for i, e in enumerate(catalogue, 1)
        )
        talk = recent_conversation(messages, cfg.recall_history_chars)
        prompt = prompts.render(
            "select", max_items=max_items, catalogue=lines, conversation=for_body(talk)
        )
        try:
            names = complete_json(
                model,
                system="You select relevant memories and answer in JSON.",
                messages=[{"role": "user", "content": prompt}],
                purpose="select",
                validate=_validator(catalogue, max_items),
                max_tokens=512,
                schema=SELECT_SCHEMA,
            )
            note = ""
            if _guarded(cfg, model):
                names, dropped = _lexical_guard(store, names, talk)
                if dropped:
                    note = f"dropped the model's picks {dropped}: no word in common"
            if not names and query.strip():  # nothing picked: search's confident hit stays
                best = store.search(query, 1)
                if best and confident(best[0]):
                    names = [best[0].name]
                    note = "; ".join(
                        filter(None, [note, f"the model picked nothing; kept search's {names[0]}"])
                    )
            return Selection(names, "llm", [(e.name, None) for e in catalogue], note)
        except LLMError as exc:
            log.warning("memory selection fell back to search: %s", exc)
            note = f"the model failed ({exc}); used search"
            return _search_selection(store, query, max_items, "search-fallback", note)
    return _search_selection(store, query, max_items, "search", why, meaning=meaning)


def confident(hit: Hit) -> bool:
    """Whether a search hit stands on its own: close in meaning to the question by the
    embedder's own bar (the one a memory sharing no word with it must pass), not merely
    sharing a word."""
    return hit.close


def floor(hits: list[Hit], query: str, unknown: Sequence[str] = ()) -> list[Hit]:
    """The hits that are evidence for the question, not merely its nearest neighbours: close
    in meaning by the embedder's own bar, or holding enough of the question's own terms (two
    of three or more, else one). Nothing when nothing is: silence over plausible noise. A
    question that names someone or something no memory mentions (``unknown``: "when did Gina
    open her store?" of a store that never heard of Gina) is about what the store does not
    hold: closeness in meaning is the domain's, not evidence, and only the terms count."""
    from ..find.search import tokenize

    terms = {t for t in tokenize(query) if len(t) > 1 or not t.isascii()}  # ("x", "a": noise)
    if not terms:
        return []
    need = 1 if len(terms) <= 2 else 2  # ("tell me about lambda": one word and its frame)
    out = []
    for h in hits:
        if h.close and not unknown:
            out.append(h)
            continue
        try:
            text = f"{h.name.replace('-', ' ')} {h.entry.description} {h.memory.body}"
        except (MemdirError, LookupError, OSError):
            text = f"{h.name.replace('-', ' ')} {h.entry.description}"
        if len(terms & set(tokenize(text))) >= need:
            out.append(h)
    return out


def _scope_tag(store: Scopes, entry: Entry) -> str:
    """ ", user" for a memory of the user's store in a catalogue of several scopes."""
    if len(store.scopes) < 2:
        return ""
    scope = store.scope_of(entry.name)
    return "" if scope == "project" else f", {scope}"


def _guarded(cfg: Config, model: ChatModel) -> bool:
    """Whether the model's picks must share a word with the conversation: ``select_guard``
    "lexical" or "none"; "auto" guards models on this machine (small local models pick
    unrelated memories; large hosted ones find paraphrases a guard would drop)."""
    mode = cfg.select_guard
    if mode == "auto":
        return runs_locally(model, cfg)
    return bool(mode == "lexical")


def _lexical_guard(store: Scopes, names: list[str], talk: str) -> tuple[list[str], list[str]]:
    """The picks that share a (stemmed) word with the conversation, and the others."""
    from ..find.search import tokenize

    words = set(tokenize(talk))
    entries = {e.name: e for e in store.entries()}
    kept: list[str] = []
    dropped: list[str] = []
    for name in names:
        e = entries.get(name)
        text = f"{name.replace('-', ' ')} {e.description}" if e else name
        (kept if words & set(tokenize(text)) else dropped).append(name)
    return kept, dropped


def unknown_names(store: Scopes, query: str) -> list[str]:
    """The names the question gives that no memory of any store mentions (in its name,
    description or body, as the full-text index holds them)."""
    given = named_terms(query)
    if not given:
        return []
    known = store.mentioned(sorted(set().union(*given.values())))
    return [n for n, terms in given.items() if not terms <= known]


def _search_selection(
    store: Scopes, query: str, max_items: int, path: str, note: str, *, meaning: bool = True
) -> Selection:
    hits = store.search(query, max_items, meaning=meaning) if query.strip() else []
    kept = hits
    if store.config.recall_floor and hits:
        unknown = unknown_names(store, query)
        kept = floor(hits, query, unknown)
        if unknown and len(kept) < len(hits):
            note = (note + "; " if note else "") + (
                f"the question names {', '.join(unknown)}, which no memory mentions"
            )
    if len(kept) < len(hits):
        below = len(hits) - len(kept)
        note = (note + "; " if note else "") + f"{below} below the relevance floor"
    return Selection([h.name for h in kept], path, [(h.name, h.score) for h in hits], note)


def select_relevant_memories(
    store: Reader, messages: list[Message], model: ChatModel | None = None, max_items: int = 5
) -> list[str]:
    """The names of the memories relevant to the conversation (the design's entry point)."""
    return select(store, messages, model, max_items=max_items).names


def load_memories(
    store: Reader,
    messages: list[Message],
    model: ChatModel | None = None,
    *,
    max_items: int | None = None,
    budget_tokens: int | None = None,
) -> str:
    """Select the relevant memories and return them as one block ('' when none apply)."""
    store = Scopes.of(store)
    cfg = store.config
    sel = select(store, messages, model, max_items=max_items or cfg.recall_max_items)
    return render_block(
        store, sel.names, budget_tokens or cfg.recall_token_budget, episodes=sel.episodes
    )


def log_recall(
    store: Reader,
    sel: Selection,
    question: str,
    *,
    source: str,
    session: str | None = None,
    block: str | None = None,
    started: float | None = None,
) -> None:
    """Add a recall to the recall log of the store it mainly read (the project's, else the
    user's), unless ``recall_log = false``; with what it cost: the tokens of ``block`` (the
    text injected) and the time since ``started`` (``time.monotonic()``). With ``block``, the
    memories logged as recalled are those it holds; the note says which picks it does not
    (held back from a model, or given at the session's start or past the budget)."""
    from html import escape

    from ..recalllog import Recalled, record

    scopes = Scopes.of(store)
    target = scopes.home()
    if target is None or not target.config.recall_log:
        return
    names, note = sel.names, sel.note
    if block is not None:
        names = [n for n in sel.names if f'<memory name="{escape(n)}"' in block]
        left = [n for n in sel.names if n not in names]
        may = shown(scopes, left)
        held = [n for n in left if n not in may]
        if held:
            note += ("; " if note else "") + f"held back from the model: {', '.join(held)}"
        if may:
            note += ("; " if note else "") + (
                f"not injected (in the session already, or past the budget): {', '.join(may)}"
            )
    scores = dict(sel.candidates)
    memories: list[Recalled] = [
        {
            "name": name,
            "scope": _scope(scopes, name),
            "score": None if scores.get(name) is None else round(float(scores[name] or 0), 4),
        }
        for name in names
    ]
    memories += [
        {"name": e.turn.ref, "scope": "episode", "score": round(e.score, 4)}
        for e in sel.episodes
        if block is None or f'ref="{escape(e.turn.ref)}"' in block
    ]
    record(
        target.internal,
        source=source,
        question=question,
        path=sel.path,
        memories=memories,
        note=note,
        session=session,
        tokens=None if block is None else estimate_tokens(block),
        ms=None if started is None else round((time.monotonic() - started) * 1000),
    )


def _scope(store: Scopes, name: str) -> str | None:
    try:
        return store.scope_of(name)
    except LookupError:
        return None
