"""memdir: long-term memory for LLM agents, kept as a folder of Markdown files."""

from .config import Config, load_config
from .errors import (
    ConflictError,
    InvalidMemory,
    InvalidName,
    MemdirError,
    MemoryNotFound,
    SecretFound,
    StoreLocked,
)
from .memory import Memory
from .plan import Put, Remove
from .store import MemoryStore

__all__ = [
    "Config",
    "ConflictError",
    "InvalidMemory",
    "InvalidName",
    "MemdirError",
    "Memory",
    "MemoryNotFound",
    "MemoryStore",
    "Put",
    "Remove",
    "SecretFound",
    "StoreLocked",
    "load_config",
]
