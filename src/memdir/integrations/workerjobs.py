"""The jobs the user's worker (or the resident's worker thread) does for a store: learn from a
host's session (extract, then consolidate when due; without a memory model, keep the turns and
say so once), embed what is not embedded yet, sync. The record of each learn goes to the store's
hook log, which ``memdir doctor`` reads (``last_learn``).
This module does NOT queue jobs (the hooks and commands do, ``jobs``) nor run the worker loop.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from .. import jobs
from ..config import Config
from ..disk.layout import HOOK_LOG as LOG
from ..disk.layout import NESTED_MARK, USAGE, state_dir
from ..disk.statefile import read_lines
from ..errors import LLMError, MemdirError
from ..providers import Message
from ..recall import message_text
from ..scopes import open_user_store, user_store_dir
from ..store import Store, open_store
from .hooks import LogRecord, log_line
from .race import model_or_why
from .transcripts import read_session


def job_handlers(config: Config, by: str = "worker") -> dict[str, jobs.Handler]:
    """What the jobs of the store opened by ``config`` do, for the worker ``by`` names (the
    store's detached one, or the resident's): learn, embed what is not embedded yet, and the
    kinds the wings do (``memdir.jobs``: git's sync, the agent's hand-over)."""
    from .. import wings

    def learn(data: jobs.Data) -> None:
        learn_job(data, config, by=by)

    def index(data: jobs.Data) -> None:
        embed_while_there(open_store(config, create=False, watch=False))

    theirs = {kind: wings.load("memdir.jobs", kind)(config) for kind in wings.names("memdir.jobs")}
    return {**theirs, "learn": learn, "index": index}


def embed_while_there(store: Store) -> None:
    """Embed every memory not embedded yet, a chunk at a time, stopping at the first look
    that finds the store's folder gone (nothing left to embed it for)."""
    root = store.root

    def still_there(done: int, total: int) -> None:
        if not root.is_dir():
            raise _Gone

    with contextlib.suppress(_Gone, FileNotFoundError):
        store.index.embed_all(still_there)


class _Gone(Exception):
    """The store the worker works for is no longer there."""


def learn_job(data: jobs.Data, config: Config, *, by: str = "worker") -> LogRecord:
    """The store worker's learn job: extract from the session a hook's event names, then
    consolidate when due; the record written to the hook log. ``jobs.Later`` when the memory
    model could not be reached (the job is kept and tried again by a later worker)."""
    from ..learn.consolidate import consolidate_memories, is_due
    from ..learn.conversation import embed_episodes
    from ..learn.extract import extract_memories

    event, host = data.get("event"), data.get("host")
    if not isinstance(event, dict) or not isinstance(host, str | None):
        raise ValueError("a learn job names no hook event")
    record: LogRecord = {
        "hook": "learn",
        "host": host,
        "event": event.get("hook_event_name"),
        "worker": by,
    }
    store = open_store(config, create=True, watch=False)
    later: LLMError | None = None
    try:  # (the store's one worker runs its jobs one at a time: a later one for this session
        # finds the cursor moved on and asks no model about what this one learned)
        messages = read_session(Path(event["transcript_path"]))
        if _nested(messages):
            raise _Nothing("a session memdir started as its memory model: not learned from")
        model, why = model_or_why(config, host, store.internal / USAGE)
        if model is None:  # what was said is kept all the same: recall finds the turns
            from ..learn.conversation import keep_episodes

            keep_episodes(store, messages)
            embed_episodes(store)
            raise _Nothing(
                f"{NO_MODEL}: the conversation's turns are kept, nothing was extracted — {why}"
                if "pip install" in why
                else f"{NO_MODEL}: the conversation's turns are kept, nothing was extracted —"
                " set an API key, or install the host's CLI"
            )
        root = user_store_dir(config)
        user = open_user_store(root, config) if root is not None else None
        result = extract_memories(
            store, messages, model, user_store=user, source=f"extract:hook:{host or 'unknown'}"
        )
        record.update(
            status="ok",
            new_messages=result.new_messages,
            saved=[c.memory.name for c in result.changes],
            dropped=result.dropped,
        )
        if result.user_changes:  # a count: the user's memories stay out of the project folder
            record["saved_to_user_store"] = len(result.user_changes)
        embed_episodes(store)  # here, in the background, not in the next prompt's hook
        for scoped in (store, user):  # each scope on its own
            if scoped is not None and is_due(scoped):
                plan = consolidate_memories(scoped, model, automatic=True)
                record.setdefault("consolidated", []).append(
                    {
                        "store": str(scoped.root),
                        "merged": len(plan.merges),
                        "retired": len(plan.retires),
                    }
                )
    except _Nothing as nothing:
        record.update(status="ok", new_messages=0, saved=[], note=str(nothing))
    except FileNotFoundError:  # the transcript went: nothing to learn
        record.update(status="ok", new_messages=0, saved=[], note="no transcript")
    except (MemdirError, OSError, KeyError, ValueError) as exc:
        record.update(status="error", error=str(exc))
        if isinstance(exc, LLMError):  # the model was down: the job is kept for later
            record["note"] = "kept for a later learn"
            later = exc
    if str(record.get("note") or "").startswith(NO_MODEL):
        _say_no_model(store, record)
    log_line(store.root, record)
    if later is not None:
        raise jobs.Later(str(later))
    if record.get("status") == "ok":
        from .. import wings

        wings.event("learned", store, config)  # (git: the store synced, and the user's)
    return record


NO_MODEL = "no memory model"  # how a learn without one begins its note


def _say_no_model(store: Store, record: LogRecord) -> None:
    """Say in the recall log, once (not again while every learn since had no model either),
    that learning keeps the turns but extracts nothing."""
    from ..recalllog import record as recall

    last = last_learn(store.root)
    if last is not None and str(last.get("note") or "").startswith(NO_MODEL):
        return
    if store.config.recall_log:
        recall(
            store.internal,
            source=f"learn:{record.get('host') or 'unknown'}",
            question="(learning)",
            path="learn",
            memories=[],
            note=str(record.get("note")),
        )


class _Nothing(Exception):
    """Nothing to learn from this session, and why (not an error)."""


def _nested(messages: list[Message]) -> bool:
    """Whether the session is one memdir itself started as its memory model."""
    first = next((m for m in messages if m.get("role") == "user"), None)
    return first is not None and NESTED_MARK in message_text(first)[:500]


def last_learn(store_dir: Path) -> LogRecord | None:
    """The newest learn record of the hook log (for ``memdir doctor``)."""
    learns = [r for r in read_lines(state_dir(store_dir) / LOG) if r.get("hook") == "learn"]
    return dict(learns[-1]) if learns else None
