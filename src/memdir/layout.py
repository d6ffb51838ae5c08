"""The names of everything memdir keeps under a store's ``.memdir/`` folder, in one place.

Everything here except ``HISTORY`` can be rebuilt from the memory files or is disposable
state; ARCHITECTURE.md says what each holds. This module does NOT read or write them.
"""

from __future__ import annotations

INTERNAL = ".memdir"
LOCK = "lock"  # the writers' lock
JOURNAL = "intent.json"  # the operation in flight (padded to whole blocks; blank: none)
LEGACY_JOURNAL = "journal.json"  # what earlier versions write (emptied when done): read too
JOURNALS = (LEGACY_JOURNAL, JOURNAL)  # where an unfinished operation may be
LOG = "log.jsonl"  # every applied operation
HISTORY = "history"  # history/<name>/NNNN.md and NNNN.json
META = "meta.json"  # the metadata cache snapshot (meta.log beside it)
INDEX_STATE = "index.json"  # what MEMORY.md was last rendered from, after a repair
SEARCH = "search.sqlite"  # the full-text index
VECTORS = "vectors.sqlite"  # embedding vectors, by content hash (memdir[embed])
EMBEDDING_LOCK = "embedding.lock"  # held by the background embedder (memdir index --background)
EMBED_DOWN = "embed_down.json"  # an embedder that just failed, and until when to leave it be
USAGE = "usage.jsonl"  # model calls
ENDPOINTS = "endpoints.json"  # what an endpoint was found not to support
CURSORS = "cursors.json"  # how far each conversation was extracted
EPISODE_CURSORS = "episode-cursors.json"  # how far each conversation was kept as episodes
CONSOLIDATE = "consolidate.json"  # when consolidation last ran, what it left for next time
PENDING = "pending"  # extractions handed over by an agent that exited
HOOK_SPOOL = "learn"  # hook events waiting for their worker
HOOK_LOG = "hooks.jsonl"  # what the host hooks did
CHAT_HISTORY = "chat_history"  # the chat's input history
SYNC_STATE = "sync.json"  # the last sync: when, what failed, a merge in flight, the log read
SYNC_LOCK = "sync.lock"  # held by the one sync of this store at work
REVIEW = "review"  # review/<id>.json: learned changes waiting for a person (review = "ask")
RECALL_LOG = "recall.jsonl"  # what was recalled for which prompt and why (recall.1.jsonl: older)
HELD = "held.json"  # memories held back from recall until reviewed (arrivals, instructions)
ADOPTED = "adopted"  # adopted/<file>: a bare note as it was before doctor made it a memory

# Set in the environment of a host CLI that memdir starts as its memory model (``claude -p``,
# ``codex exec``): memdir's own hooks in that nested session do nothing, so learning through
# a host never starts itself again.
NESTED_ENV = "MEMDIR_NESTED"
# The first line of every request memdir sends to a host CLI: a session that begins with it
# is memdir's own, never learned from (a host that drops the environment still stops here).
NESTED_MARK = "[memdir: a memory request, not a conversation to learn from]"
