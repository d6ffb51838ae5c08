"""memdir: long-term memory for LLM agents, kept as a folder of Markdown files."""

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from .backend import open_store
from .config import Config, load_config
from .entry import Entry, Hit
from .errors import (
    ConfigError,
    ConflictError,
    InvalidMemory,
    InvalidName,
    LLMError,
    LLMUnavailable,
    MemdirError,
    MemoryNotFound,
    PlanError,
    ReadOnlyStore,
    ReplyFormatError,
    SecretFound,
    StoreLocked,
    StoreNotFound,
)
from .memory import Memory
from .plan import Put, Remove
from .scopes import Scopes
from .store import MemoryStore

if TYPE_CHECKING:
    from .pgstore import PgStore


def __getattr__(name: str) -> object:
    """``PgStore`` is imported when first asked for (only database users need it)."""
    if name == "PgStore":
        from .pgstore import PgStore

        return PgStore
    raise AttributeError(f"module 'memdir' has no attribute {name!r}")


try:
    __version__ = version("memdir")
except PackageNotFoundError:  # a source tree that was not installed
    __version__ = "0"

__all__ = [
    "Config",
    "ConfigError",
    "ConflictError",
    "Entry",
    "Hit",
    "InvalidMemory",
    "InvalidName",
    "LLMError",
    "LLMUnavailable",
    "MemdirError",
    "Memory",
    "MemoryNotFound",
    "MemoryStore",
    "PgStore",
    "PlanError",
    "Put",
    "ReadOnlyStore",
    "Remove",
    "ReplyFormatError",
    "Scopes",
    "SecretFound",
    "StoreLocked",
    "StoreNotFound",
    "__version__",
    "load_config",
    "open_store",
]
