"""Learning: what a model may add to or change in the memories, made safe before it lands.

- ``extract``: what in a conversation is worth remembering, as a plan (``extract_memories``).
- ``conversation``: which messages are new since the last extraction, and keeping every turn
  as an episode at once.
- ``consolidate``: merging duplicates and retiring stale memories (``consolidate_memories``),
  with ``plan`` making the model's answer a safe plan and ``mergecheck`` saying what a merge
  or a retirement may do.
- ``proposal``: a model's proposed memory made usable (names, types, no placeholders).

This package decides what to remember; it does NOT apply changes itself but through
``review.land`` and the store, and does NOT choose memories for a prompt (``recall``).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .consolidate import consolidate_memories
    from .extract import extract_memories

_WHERE = {"extract_memories": "extract", "consolidate_memories": "consolidate"}


def __getattr__(name: str) -> Any:
    """``extract_memories`` and ``consolidate_memories``, imported when first asked for (a
    hook that only keeps episodes does not pay for extraction)."""
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'memdir.learn' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{where}"), name)


__all__ = ["consolidate_memories", "extract_memories"]
