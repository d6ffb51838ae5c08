"""Where memdir keeps a store's own state, and the names of everything in it, in one place.

A folder store's state (history, the log, review and held lists, caches) lives outside the
store's folder, in the user's state folder keyed by the store's real path
(``state_dir``), where no ``git pull``, ``git clone`` or checkout can write or delete it and
no file a repository brings can pass for it: a ``.memdir`` (``INTERNAL``) in the folder is
not memdir's and is never read. Everything here except ``HISTORY`` and ``LOG`` can be rebuilt
from the memory files or is disposable state; ARCHITECTURE.md says what each holds.
This module does NOT read or write them.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # (as typing.TYPE_CHECKING, without importing typing)
if TYPE_CHECKING:
    from pathlib import Path

# (the hook's client imports this module for a name: what the functions need, they import)
INTERNAL = ".memdir"  # a state folder inside a store's folder: never memdir's (sync refuses it)
STORES = "stores"  # <user state folder>/stores/<folder name>-<digest of its real path>


def state_home() -> Path:
    """The user's state folder for memdir (``$XDG_STATE_HOME/memdir`` on Linux)."""
    from pathlib import Path

    import platformdirs

    return Path(platformdirs.user_state_dir("memdir", appauthor=False))


def state_dir(root: Path) -> Path:
    """The folder that holds the state of the store whose folder is ``root``: one per real
    path, named for the folder (and its parent) so a person can tell which is which — or,
    for a folder reached by a second path (a bind mount), the first path's (``ALIAS``)."""
    import hashlib
    import re

    real = os.path.realpath(root)
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    parts = [p for p in real.split(os.sep) if p][-2:]
    label = re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(parts)).strip("._-")[:48] or "root"
    stores = state_home() / STORES
    own = stores / f"{label}-{digest}"
    if own.is_dir():
        return own
    try:
        other = (stores / f"{label}-{digest}{ALIAS}").read_text(encoding="utf-8").strip()
    except OSError:  # (no alias: the usual case)
        return own
    return stores / other if re.fullmatch(r"[A-Za-z0-9._-]+", other) and other[0] != "." else own


ALIAS = ".alias"  # stores/<key>.alias: the state folder's name of the same folder's first path


LOCK = "lock"  # the writers' lock
FOLDER_ID = "folder.json"  # which folder the state is for: its device, inode and path
JOURNAL = "intent.json"  # the operation in flight (padded to whole blocks; blank: none)
JOURNALS = (JOURNAL,)  # where an unfinished operation may be
LOG = "log.jsonl"  # every applied operation
HISTORY = "history"  # history/<name>/NNNN.md and NNNN.json
# the store's index: each file's row, full-text document and vector, and the episodes'
INDEX_DB = "index.sqlite"
INDEX_STATE = "index.json"  # what MEMORY.md was last rendered from, after a repair
EMBED_DOWN = "embed_down.json"  # an embedder that just failed, and until when to leave it be
USAGE = "usage.jsonl"  # model calls
ENDPOINTS = "endpoints.json"  # what an endpoint was found not to support
CURSORS = "cursors.json"  # how far each conversation was extracted
EPISODE_CURSORS = "episode-cursors.json"  # how far each conversation was kept as episodes
CONSOLIDATE = "consolidate.json"  # when consolidation last ran, what it left for next time
HOOK_LOG = "hooks.jsonl"  # what the host hooks did
CHAT_HISTORY = "chat_history"  # the chat's input history
SYNC_STATE = "sync.json"  # the last sync: when, what failed, a merge in flight, the log read
SYNC_LOCK = "sync.lock"  # held by the one sync of this store at work
REVIEW = "review"  # review/<id>.json: learned changes waiting for a person (review = "ask")
RECALL_LOG = "recall.jsonl"  # what was recalled for which prompt and why (recall.1.jsonl: older)
HELD = "held.json"  # memories held back from recall until reviewed (arrivals, instructions)
ACCEPTED = "accepted.json"  # texts of a standing kind the user accepted as their own
ADOPTED = "adopted"  # adopted/<file>: a bare note as it was before doctor made it a memory

# Set in the environment of a host CLI that memdir starts as its memory model (``claude -p``,
# ``codex exec``): memdir's own hooks in that nested session do nothing, so learning through
# a host never starts itself again.
NESTED_ENV = "MEMDIR_NESTED"
# The first line of every request memdir sends to a host CLI: a session that begins with it
# is memdir's own, never learned from (a host that drops the environment still stops here).
NESTED_MARK = "[memdir: a memory request, not a conversation to learn from]"
