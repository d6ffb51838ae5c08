"""The exceptions memdir raises.

Every error a user can meet is a ``MemdirError`` whose message is one sentence naming the fix.
Subclasses also subclass the builtin they resemble, so callers may catch either.
This module does NOT render errors: only ``cli`` does.
"""

from __future__ import annotations


class MemdirError(Exception):
    """Base class of every error memdir raises on purpose."""


class InvalidName(MemdirError, ValueError):
    """A memory name breaks the naming rules."""


class InvalidMemory(MemdirError, ValueError):
    """A memory file or a memory value is malformed."""


class MemoryNotFound(MemdirError, LookupError):
    """No memory has the requested name (or no such version exists)."""


class StoreNotFound(MemdirError, FileNotFoundError):
    """There is no memory store where one was expected."""


class ConflictError(MemdirError):
    """A file changed on disk since memdir read it, or two memories claim one file."""


class StoreLocked(MemdirError, TimeoutError):
    """Another process held the store lock for too long."""


class SecretFound(MemdirError, ValueError):
    """Text about to be written contains what looks like a credential."""


class ConfigError(MemdirError, ValueError):
    """The configuration is incomplete or invalid."""


class LLMError(MemdirError):
    """A call to the language model failed (after retries)."""


class LLMUnavailable(LLMError):
    """No language model is configured, its SDK is missing, or its endpoint is unreachable."""


class ReplyFormatError(LLMError, ValueError):
    """The model's reply could not be parsed into the shape the caller expects."""


class ReadOnlyStore(MemdirError, PermissionError):
    """The store cannot be written: a shared store, a read-only mount, a checked-in folder."""


class PlanError(MemdirError, ValueError):
    """A plan of changes failed validation; nothing was changed."""
