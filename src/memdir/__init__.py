"""memdir: long-term memory for LLM agents, kept as a folder of Markdown files.

Every name below is imported when first asked for, so that a command which needs little (the
hosts' hook client, ``memdir --version``) does not pay for the store it does not open.
"""

TYPE_CHECKING = False  # (what ``typing`` says at run time, without importing it for the hooks)

if TYPE_CHECKING:
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
    from .store import MemoryStore, Store, open_store

_WHERE = {
    "open_store": "store",
    "Config": "config",
    "load_config": "config",
    "Entry": "entry",
    "Hit": "entry",
    "Memory": "memory",
    "Put": "plan",
    "Remove": "plan",
    "Scopes": "scopes",
    "MemoryStore": "store",
    "Store": "store",
    **{
        name: "errors"
        for name in (
            "ConfigError",
            "ConflictError",
            "InvalidMemory",
            "InvalidName",
            "LLMError",
            "LLMUnavailable",
            "MemdirError",
            "MemoryNotFound",
            "PlanError",
            "ReadOnlyStore",
            "ReplyFormatError",
            "SecretFound",
            "StoreLocked",
            "StoreNotFound",
        )
    },
}


def __getattr__(name: str) -> object:
    """The public names, each imported from its module when first asked for."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("memdir")
        except PackageNotFoundError:  # a source tree that was not installed
            found = "0"
        globals()["__version__"] = found
        return found
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'memdir' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


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
    "PlanError",
    "Put",
    "ReadOnlyStore",
    "Remove",
    "ReplyFormatError",
    "Scopes",
    "SecretFound",
    "Store",
    "StoreLocked",
    "StoreNotFound",
    "__version__",
    "load_config",
    "open_store",
]
