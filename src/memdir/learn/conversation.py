"""A conversation's turns as learning reads them: which messages are new since the last
extraction (a cursor per conversation, so that nothing is extracted twice), and keeping every
turn as a dated episode at once, whatever the memory model does later.
This module does NOT ask a model (``extract``) and does NOT search episodes (``episodes``).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from typing import Any

from ..disk.layout import CURSORS, EPISODE_CURSORS
from ..disk.statefile import StateFile
from ..errors import MemdirError
from ..gate.safetext import speaker_turn
from ..providers import Message
from ..recall import message_text
from ..store import Store, readable

log = logging.getLogger("memdir.extract")


def conversation_key(messages: list[Message]) -> str:
    """Identity of a conversation: a hash of its first message."""
    first = json.dumps(messages[0] if messages else {}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(first.encode()).hexdigest()[:16]


def _prefix_digest(messages: list[Message]) -> str:
    """A digest of the messages as they were (an edited or compacted history differs)."""
    data = json.dumps(messages, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(data.encode()).hexdigest()


class Cursors:
    """How many messages of each conversation were already extracted (``<state>/cursors.json``)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.file = StateFile(store.internal / CURSORS, lock=store.locked)
        self.data = self.file.read()

    def start(self, messages: list[Message]) -> int:
        """Index of the first message not yet processed (0 if the history was rewritten)."""
        return _start(self.data.get(conversation_key(messages)), messages)

    def advance(self, messages: list[Message]) -> None:
        """Mark every message as processed; under the store lock, so that two agents
        extracting from different conversations at once do not lose each other's cursor."""
        with self.file.changing() as data:
            data[conversation_key(messages)] = {
                "count": len(messages),
                "digest": _prefix_digest(messages),
            }
        self.data = data


def _start(rec: Any, messages: list[Message]) -> int:
    """Where a cursor record says the new messages begin (0: read it all again)."""
    if not isinstance(rec, dict) or rec.get("count", 0) > len(messages):
        return 0
    if _prefix_digest(messages[: rec["count"]]) != rec.get("digest"):
        return 0  # the conversation was edited or compacted: read it all again
    return int(rec["count"])


def render_new(messages: list[Message], start: int, max_chars: int) -> str:
    """The messages from ``start`` as speaker turns (the one before, for context), the
    newest kept within ``max_chars``."""
    lines = []
    if start:
        lines.append("(earlier messages were already processed; the last one, for context:)")
        last = messages[start - 1]
        lines.append(speaker_turn(last["role"], message_text(last)[:500]))
        lines.append("(new messages:)")
    for msg in messages[start:]:
        text = message_text(msg).strip()
        if text:
            lines.append(speaker_turn(msg["role"], text))
    out = "\n".join(lines)
    return out if len(out) <= max_chars else "…" + out[-max_chars:]


def _spoken(message: Message) -> str:
    """What a person said or read in a message: its text, without tool calls and results
    (a turn of tool work is not part of the conversation to remember)."""
    content = message.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def said_in(store: Store, names: Sequence[str]) -> list[str]:
    """The kept turns (``file#n``) the memories ``names`` were learned from (their
    ``episode`` key: one ref, or ``file#a-b``)."""
    refs: list[str] = []
    for mem in filter(None, (readable(store, name) for name in names)):
        where = str(mem.extra.get("episode") or "")
        fname, _, span = where.partition("#")
        first, _, last = span.partition("-")
        if fname and first.isdigit():
            end = int(last) if last.isdigit() else int(first)
            refs += [f"{fname}#{n}" for n in range(int(first), end + 1)]
    return refs


def supersede_episodes(store: Store, refs: Sequence[str], by: str) -> None:
    """The turns a corrected memory was learned from are kept but no longer recalled beside
    its correction."""
    from ..episodes import Episodes

    if not refs:
        return
    episodes = Episodes(store.internal, store.config)
    try:
        episodes.supersede(refs, f"superseded by {by}")
    finally:
        episodes.close()


def keep_episodes(
    store: Store, messages: list[Message], said_at: str | None = None
) -> tuple[int, list[str]]:
    """Keep the messages of the conversation not kept yet as dated turns (``episodes``): at
    once, whatever the memory model does later, so what was said is searchable even when
    extraction fails or runs in the next session, and is never kept twice. Its own cursor
    (``episode-cursors.json``). Returns where the turns kept last begin in ``messages`` and
    their refs (refs from an earlier call when nothing was new; none when off)."""
    from ..episodes import Episodes

    if not store.config.episodes or store.read_only or not messages:
        return len(messages), []
    key = conversation_key(messages)
    cursors = StateFile(store.internal / EPISODE_CURSORS, lock=store.locked)
    kept = _kept(cursors.read().get(key), messages)
    if kept is not None:  # nothing new: no lock taken, nothing written
        return kept
    episodes = Episodes(store.internal, store.config)
    try:
        with cursors.changing() as data:  # one process keeps each turn, once
            kept = _kept(data.get(key), messages)
            if kept is not None:  # another process kept them meanwhile
                return kept
            start = _start(data.get(key), messages)
            said = [(str(m.get("role")), _spoken(m)) for m in messages[start:]]
            refs = episodes.record(said, conversation=key, said_at=said_at)
            episodes.amend(refs)  # what these turns decided again replaces what was said
            data[key] = {
                "count": len(messages),
                "digest": _prefix_digest(messages),
                "from": start,
                "refs": refs[:1] + refs[-1:] if len(refs) > 1 else refs,
            }
            return start, refs
    except OSError as exc:  # never lose the memories over the episodes
        log.warning("memdir: could not keep the conversation as episodes: %s", exc)
        return len(messages), []
    finally:
        episodes.close()


def _kept(rec: Any, messages: list[Message]) -> tuple[int, list[str]] | None:
    """Where the turns kept last begin and their refs, when every message is kept already."""
    if not isinstance(rec, dict) or _start(rec, messages) != len(messages):
        return None
    return int(rec.get("from", len(messages))), [str(r) for r in rec.get("refs", [])]


def embed_episodes(store: Store, *, load: bool = True) -> None:
    """Embed the kept turns that have no vector yet, with the store's embedder (the one it
    was given, or has made) or else the configured one (none: nothing to do), so that recall
    finds them by meaning without embedding them itself. With ``load=False`` only if this
    process has the embedder already (no model is loaded for it: an agent's turn ends at
    once). A failing embedder is logged: recall then embeds them, or
    ranks them by their words."""
    from ..episodes import Episodes
    from ..find.embed import from_config, loaded

    if not store.config.episodes or store.read_only:
        return
    episodes = Episodes(store.internal, store.config)
    try:
        embedder = store.index.ranker().embedder or (
            from_config(store.config) if load else loaded(store.config)
        )
        if embedder is not None:
            episodes.embed(embedder)
    except (MemdirError, OSError) as exc:
        log.warning("memdir: the kept turns were not embedded: %s", exc)
    finally:
        episodes.close()
