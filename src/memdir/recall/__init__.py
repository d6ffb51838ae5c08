"""Recall: choose the few memories that matter now and put them in front of the model.

- ``choose``: ``select`` / ``select_relevant_memories`` (the memory model picks from the
  catalogue; search is the fallback and the method without a model), ``episodes_for``,
  ``load_memories``, ``log_recall``.
- ``turns``: ``episodes_for`` (the earlier turns that speak to a question).
- ``block``: ``render_block`` (the escaped ``<relevant_memories>`` block within a budget),
  ``weave`` (in front of the current user message), ``build_system`` / ``index_section``
  (the bounded memory index of the system prompt).

Every function reads ``Scopes``; a single store passed in is read as a scope of one
(``Scopes.of``). This package does NOT write memories.
"""

from .block import (
    NO_MEMORIES,
    PREAMBLE,
    build_system,
    current_user_index,
    estimate_tokens,
    index_section,
    origin_label,
    render_block,
    said_date,
    weave,
    where_kept,
)
from .choose import (
    SELECT_SCHEMA,
    Selection,
    catalogue_for,
    confident,
    load_memories,
    log_recall,
    message_text,
    recent_conversation,
    search_query,
    select,
    select_relevant_memories,
)
from .turns import episodes_for

__all__ = [
    "NO_MEMORIES",
    "PREAMBLE",
    "SELECT_SCHEMA",
    "Selection",
    "build_system",
    "catalogue_for",
    "confident",
    "current_user_index",
    "episodes_for",
    "estimate_tokens",
    "index_section",
    "load_memories",
    "log_recall",
    "message_text",
    "origin_label",
    "recent_conversation",
    "render_block",
    "said_date",
    "search_query",
    "select",
    "select_relevant_memories",
    "weave",
    "where_kept",
]
