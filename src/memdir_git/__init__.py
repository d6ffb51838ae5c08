"""Syncing a store through git: several machines, or a team, sharing one folder of memories.

- ``run``: ``memdir sync`` (commit, fetch, check, merge, hold, push) and the background sync.
- ``commit``: what sync commits, and what it holds back from recall for review.
- ``guard``: what sync lets in and out of git (what the remote sent, checked first).
- ``repo``: the repository a store lives in, its merge drivers, the last sync, conflicts.
- ``report``: what a sync did, as a person reads it.
- ``merge``: the three-way merge of one memory file (git's merge driver).
- ``git``: running git with its failures as one-line errors.

This package owns the git side of a folder store. It does NOT write memories but through the
store (``adopt``), and does NOT serve a database store (a database is shared already).
"""
