"""Configuration, resolved once at the edge into a frozen ``Config``.

Precedence: defaults < the user's ``config.toml`` (in the user's configuration folder) < the
project store's ``config.toml`` < ``MEMDIR_*`` environment < explicit overrides (command-line
flags). A project's file came with the repository: its settings that send data or keys
somewhere or grant permissions (``trust.SENSITIVE``) are ignored, and listed in
``Config.ignored``, until the user trusts that file's content (``memdir trust``).
Library code receives a ``Config``; it never reads ``os.environ`` itself.
This module does NOT create models or stores.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .trust import SENSITIVE, USER_CONFIG, TrustList, config_home, digest, inside, settings_file

# what an untrusted notice says of a config.toml that a sync brought and nobody accepted yet
PULLED_NOTE = "the settings a sync brought (the file's earlier settings apply)"

DEFAULT_TYPES = ("user_preference", "project_fact", "feedback", "reference")

DEFAULT_MODELS = {
    "anthropic": ("claude-sonnet-5-5", "claude-haiku-5-5"),
    "openai": ("gpt-5.5", "gpt-5.4-mini"),
}


@dataclass(frozen=True)
class Config:
    """Every setting memdir reads, with its default."""

    dir: Path = Path(".memory")
    dir_source: str = "default"  # how ``dir`` was found: flag, env, found (upward), git (the
    # top of the repository, no store yet) or default (the working folder, no store yet)
    types: tuple[str, ...] = DEFAULT_TYPES
    provider: str | None = None
    model: str | None = None
    memory_model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    timeout: float = 60.0
    max_retries: int = 2
    lock_timeout: float = 30.0
    max_file_bytes: int = 256 * 1024
    recall_max_items: int = 5
    recall_token_budget: int = 2000
    context_tokens: int = 0  # the chat model's context window; 0: asked of its server, or known
    standing_token_budget: int = 1200  # what a host gets at session start (standing memories)
    recall_history_chars: int = 4000
    select_catalogue_max: int = 200
    index_max_lines: int = 200
    index_max_bytes: int = 25_000
    consolidate_threshold: int = 50
    consolidate_cooldown: int = 10
    consolidate_max_retire_share: float = 0.3
    consolidate_batch: int = 60
    consolidate_max_calls: int = 4  # model calls per automatic run; the rest waits its turn
    consolidate_auto: str = "auto"  # automatic runs: "apply", "propose" (review), "auto"
    allow: tuple[str, ...] = ()  # agent approvals: "bash:pytest*", "write:src/**"
    extract_style: str = "auto"  # "memories", "facts", or "auto" (facts for local endpoints)
    select_guard: str = "auto"  # "lexical", "none", or "auto" (lexical for local endpoints)
    recall_select: str = "model"  # who picks the memories recall adds: "model" or "search"
    hook_budget: float = 2.0  # seconds the prompt hook gives the memory model before search
    hook_model_wait: float = 0.5  # of that budget, the share the model may take once search
    # has answered: a slow model never costs the whole budget
    embed_budget: float = 3.0  # seconds a command's search embeds new memories; then background
    embedder: str = "auto"  # "auto" (MiniLM if memdir[embed] is installed), minilm, e5, http, none
    embed_model: str | None = None  # the endpoint's model ("http"), or an ONNX file ("minilm")
    embed_url: str | None = None  # an OpenAI-compatible base URL for "http" (default: base_url)
    embed_api_key: str | None = field(default=None, repr=False)
    user_dir: Path | None = None  # the user's own store ("none": no user scope); see scopes.py
    read_only: tuple[str, ...] = ()  # shared stores recalled from, never written
    review: str = "auto"  # "ask": learned changes wait for a person (memdir review, memdir ui)
    recall_log: bool = True  # keep a bounded log of what was recalled for which prompt and why
    episodes: bool = True  # keep what was said (dated turns) beside what was learned from it
    episodes_keep_days: int = 90
    episodes_max_bytes: int = 20 * 1024 * 1024
    recall_episodes: int = 2  # turns recall may add beside the memories
    sync: str = "off"  # "auto": pull when a session starts, commit and push after learning
    sync_debounce: float = 10.0  # seconds an automatic sync waits for more changes
    sync_interval: float = 300.0  # a session start pulls if the last sync is older than this
    database_url: str | None = field(default=None, repr=False)  # PostgreSQL: memories there
    store: str = "default"  # the store's namespace in that database
    config_file: Path | None = None  # the project's config.toml, when there is one
    ignored: tuple[str, ...] = ()  # its settings not honoured: the file is not trusted
    # the same without the project's file: what the user's own store is opened with
    mine: Config | None = field(default=None, repr=False, compare=False)

    @property
    def own(self) -> Config:
        """The configuration for the user's own store: the user's settings, never a
        project's."""
        return self.mine or self

    @property
    def chat_model(self) -> str:
        """The main (agent) model name, or the provider's default."""
        return self.model or DEFAULT_MODELS.get(self.provider or "anthropic", ("", ""))[0]

    @property
    def memory_model_name(self) -> str:
        """The model for memory operations: set explicitly, else the main model if one was set
        (a local endpoint rarely serves the provider's default), else the cheaper default."""
        return (
            self.memory_model
            or self.model
            or DEFAULT_MODELS.get(self.provider or "anthropic", ("", ""))[1]
        )


_FIELDS = {f.name: f for f in dataclasses.fields(Config)}
_ENV = {
    "MEMDIR_DIR": "dir",
    "MEMDIR_PROVIDER": "provider",
    "MEMDIR_MODEL": "model",
    "MEMDIR_MEMORY_MODEL": "memory_model",
    "MEMDIR_TIMEOUT": "timeout",
    "MEMDIR_MAX_RETRIES": "max_retries",
    "MEMDIR_API_KEY": "api_key",
    "MEMDIR_BASE_URL": "base_url",
    "MEMDIR_CONSOLIDATE_THRESHOLD": "consolidate_threshold",
    "MEMDIR_RECALL_TOKEN_BUDGET": "recall_token_budget",
    "MEMDIR_CONTEXT_TOKENS": "context_tokens",
    "MEMDIR_EMBEDDER": "embedder",
    "MEMDIR_USER_DIR": "user_dir",
    "MEMDIR_EMBED_MODEL": "embed_model",
    "MEMDIR_EMBED_URL": "embed_url",
    "MEMDIR_EMBED_API_KEY": "embed_api_key",
    "MEMDIR_DATABASE_URL": "database_url",
    "MEMDIR_STORE": "store",
}
_SECRET = {"dir", "dir_source", "api_key", "embed_api_key", "config_file", "ignored", "mine"}
# (never from config.toml)
EMBEDDERS = ("auto", "none", "minilm", "e5", "http")
SYNC_MODES = ("off", "auto")
CHOICES = {
    "review": ("auto", "ask"),
    "sync": SYNC_MODES,
    "embedder": EMBEDDERS,
    "extract_style": ("auto", "memories", "facts"),
    "select_guard": ("auto", "lexical", "none"),
    "recall_select": ("model", "search"),
    "consolidate_auto": ("auto", "apply", "propose"),
}
PROVIDERS = ("anthropic", "openai", "claude-code", "codex")
_FLAGS = {"database_url": "--db", "dir": "--dir"}
_STORE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_DB_SCHEMES = ("postgresql://", "postgres://")


def _coerce(name: str, value: Any, source: str) -> Any:
    """Convert a raw setting to its field's type, or raise ConfigError naming the source."""
    default = _FIELDS[name].default
    try:
        if name == "dir":
            return Path(value)
        if name == "user_dir":
            return None if value in (None, "") else Path(os.path.expanduser(str(value)))
        if name in ("types", "allow", "read_only"):
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(str(t).strip() for t in items if str(t).strip())
        if isinstance(default, bool):
            return value if isinstance(value, bool) else str(value).lower() in {"1", "true", "yes"}
        if isinstance(default, (int, float)):
            number = int(value) if isinstance(default, int) else float(value)
            if number < 0:
                raise ValueError("negative")
            return number
        text = None if value in (None, "") else str(value)
        if name in CHOICES and text not in CHOICES[name]:
            *rest, last = (f'"{c}"' for c in CHOICES[name])
            raise ConfigError(
                f"{source}: {name} = {text!r} is not valid — use {', '.join(rest)} or {last}"
            )
        if name == "store" and not (text and _STORE_NAME.fullmatch(text)):
            raise ConfigError(
                f"{source}: store = {text!r} is not valid — use letters, digits, '.', '_' or"
                " '-' (at most 64)"
            )
        if name == "database_url" and text and not text.startswith(_DB_SCHEMES):
            raise ConfigError(
                f"{source}: database_url must start with postgresql:// (or postgres://)"
            )
        return text
    except ConfigError:
        raise
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: {name} = {value!r} is not valid — fix or remove it") from None


def find_store_dir(
    flag: Any = None, env_dir: str | None = None, start: Path | None = None
) -> tuple[Path, str]:
    """Where the store is, and how that was decided: ``--dir``, else ``MEMDIR_DIR``, else the
    nearest ``.memory`` folder in the working directory or a parent (as git finds ``.git``),
    up to the top of the git repository the folder is in (a ``.memory`` above a repository
    is not its store: the top's ``.memory`` is, created on first write), else ``./.memory``
    (which only ``memdir init`` and writes create)."""
    if flag:
        return Path(flag), "flag"
    if env_dir:
        return Path(env_dir), "env"
    here = (start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        candidate = folder / ".memory"
        if candidate.is_dir():
            return (Path(".memory") if folder == here else candidate), "found"
        if (folder / ".git").exists():  # a repository's store is at its top, never above it
            return (Path(".memory") if folder == here else candidate), "git"
    return Path(".memory"), "default"


def read_toml(path: Path) -> dict[str, Any]:
    """A config.toml's settings, coerced; ConfigError for bad TOML or an unknown key."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read ({exc.strerror}) — fix its permissions") from None
    return parse_toml(raw, path)


def parse_toml(raw: bytes, path: Path) -> dict[str, Any]:
    """The settings in ``raw``, the bytes of the config.toml at ``path`` (for messages)."""
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}) — fix the file") from None
    flat = dict(data.get("memdir", {}), **{k: v for k, v in data.items() if k != "memdir"})
    values: dict[str, Any] = {}
    for key, value in flat.items():
        key = key.replace("-", "_")
        if key not in _FIELDS or key in _SECRET:
            import difflib

            names = [f for f in _FIELDS if f not in _SECRET]
            close = difflib.get_close_matches(key, names, n=1)
            fix = f"did you mean {close[0]!r}?" if close else "remove it"
            raise ConfigError(f"{path}: unknown setting {key!r} — {fix}")
        values[key] = _coerce(key, value, str(path))
    return values


# What an untrusted project file may still set, and in which direction: only to tighten a
# guard or spend less ("lower": at most what is otherwise in force; "higher": at least;
# a tuple: only these values). Any other setting that is not plainly about the project
# (model names, timeouts, budgets, styles) counts only once the file is trusted.
TIGHTEN: dict[str, str | tuple[Any, ...]] = {
    "review": ("ask",),
    "recall_log": (True,),
    "select_guard": ("lexical",),
    "recall_select": ("search",),  # no model call: costs nothing
    "consolidate_auto": ("propose",),
    "max_file_bytes": "lower",
    "consolidate_max_retire_share": "lower",
    "consolidate_max_calls": "lower",
    "consolidate_batch": "lower",
    "consolidate_threshold": "higher",
    "consolidate_cooldown": "higher",
    "recall_max_items": "lower",
    "recall_token_budget": "lower",
    "context_tokens": "lower",  # a smaller window refuses sooner: never sends more
    "standing_token_budget": "lower",
    "recall_history_chars": "lower",
    "select_catalogue_max": "lower",
    "timeout": "lower",
    "max_retries": "lower",
    "hook_budget": "lower",
    "hook_model_wait": "lower",
    "embed_budget": "lower",
    "episodes_keep_days": "lower",
    "episodes_max_bytes": "lower",
}
# Plainly the project's own business: any value.
PROJECT_OWN = frozenset(
    {"types", "index_max_lines", "index_max_bytes", "recall_episodes", "episodes",
     "sync_debounce", "sync_interval", "lock_timeout", "extract_style"}
)  # fmt: skip


def _tightens(key: str, value: Any, current: Any) -> bool:
    rule = TIGHTEN[key]
    if isinstance(rule, tuple):
        return value in rule or value == current
    return bool(value <= current) if rule == "lower" else bool(value >= current)


def _project_settings(
    path: Path, home: Path, project: Path, before: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The settings of a project's config.toml that apply over ``before`` (what is in force
    without it), and the ones ignored. Untrusted, the file may only tighten guards and spend
    less; what sends data or keys elsewhere, grants permissions or costs money waits for
    ``memdir trust``. The file is read once: the bytes parsed are the bytes hashed. A link is
    never followed (trust is for the project's own file)."""
    source = settings_file(path)
    if source != path:  # a sync's version waits: the one it replaced applies, if any
        return ({} if source is None else read_toml(source)), [PULLED_NOTE]
    if path.is_symlink():
        return {}, ["every setting (config.toml is a link; a project's own file is read)"]
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read ({exc.strerror}) — fix its permissions") from None
    values = parse_toml(raw, path)
    kept: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in values.items():
        current = before.get(key, _FIELDS[key].default)
        if key == "read_only":
            inner = tuple(r for r in value if _inside_project(str(r), project))
            ignored += [f"read_only {r!r}" for r in value if r not in inner]
            if inner:
                kept[key] = inner
        elif key in PROJECT_OWN or (key in TIGHTEN and _tightens(key, value, current)):
            kept[key] = value
        else:
            ignored.append(key)
    # the trust list is read only when the file asks for more than an untrusted one may
    if ignored and TrustList(home).trusts(path, hashlib.sha256(raw).hexdigest()):
        return values, []
    return kept, ignored


def _inside_project(raw: str, project: Path) -> bool:
    """Whether an untrusted ``read_only`` entry names a folder inside the project, by the
    same resolved path the store is opened at: no ``..``, no absolute path, no ``~``."""
    parts = Path(raw).parts
    if raw.startswith("~") or Path(raw).is_absolute() or ".." in parts:
        return False
    return inside(project / raw, project)


def load_config(
    overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Config:
    """Resolve the configuration from defaults, the user's config.toml, the project's
    config.toml (its sensitive settings only if trusted), the environment and overrides."""
    env = os.environ if environ is None else environ
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    values: dict[str, Any] = {}
    store_dir, source = find_store_dir(overrides.get("dir"), env.get("MEMDIR_DIR"))
    home = config_home(env)
    user_file = home / USER_CONFIG
    if user_file.is_file():
        values.update(read_toml(user_file))
    users = dict(values)  # the user's own settings: what the user's own store is opened with
    toml_path = store_dir / "config.toml"
    from_project: set[str] = set()
    if toml_path.is_file():
        project = store_dir.absolute().parent
        settings, ignored = _project_settings(toml_path, home, project, values)
        values.update(settings)
        from_project = set(settings)
        values["config_file"], values["ignored"] = toml_path, tuple(ignored)
    values["dir"], values["dir_source"] = store_dir, source
    for var, key in _ENV.items():
        if env.get(var) and key != "dir":
            values[key] = _coerce(key, env[var], var)
            from_project.discard(key)
    for key, value in overrides.items():
        if key != "dir":
            values[key] = _coerce(key, value, _FLAGS.get(key, "--" + key.replace("_", "-")))
            from_project.discard(key)
    provider = values.get("provider")
    if provider is not None and provider not in PROVIDERS:
        raise ConfigError(
            f"unknown provider {provider!r} — set MEMDIR_PROVIDER to one of {', '.join(PROVIDERS)}"
        )
    if provider is None:
        # Pick the provider whose key is present; anthropic is the default.
        if env.get("ANTHROPIC_API_KEY"):
            values["provider"] = "anthropic"
        elif env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
            values["provider"] = "openai"
    chosen = values.get("provider") or "anthropic"
    prefix = "ANTHROPIC" if chosen in ("anthropic", "claude-code") else "OPENAI"
    values.setdefault("api_key", env.get(f"{prefix}_API_KEY") or None)
    values.setdefault("base_url", env.get(f"{prefix}_BASE_URL") or None)
    values.setdefault("embed_api_key", env.get("OPENAI_API_KEY") or None)
    if from_project:
        own = {k: v for k, v in values.items() if k not in from_project}
        own.update({k: users[k] for k in from_project if k in users})
        values["mine"] = Config(**own)
    return Config(**values)


def store_config(root: Path) -> Config:
    """The configuration a library user gets from ``MemoryStore(path)`` alone: the defaults and
    the store's own config.toml, without its settings that only the user may make (endpoints,
    the embedder, approvals: those come from ``load_config`` at an entry point). It reads no
    environment variable."""
    path = root / "config.toml"
    values: dict[str, Any] = {}
    ignored: list[str] = []
    if path.is_file():
        source = settings_file(path)
        settings = {} if source is None else read_toml(source)
        if source != path:
            ignored = [PULLED_NOTE]
        for key, value in settings.items():
            if key in SENSITIVE:
                ignored.append(key)
            else:
                values[key] = value
    return Config(
        dir=root,
        dir_source="flag",
        config_file=path if path.is_file() else None,
        ignored=tuple(ignored),
        **values,
    )


def ignored_notice(config: Config, environ: Mapping[str, str] | None = None) -> str | None:
    """The one line that tells a person which settings of an untrusted project file were
    ignored, the first time this content is seen (None after that, or when nothing was)."""
    if not config.ignored or config.config_file is None:
        return None
    env = os.environ if environ is None else environ
    try:
        fresh = TrustList(config_home(env)).announce(config.config_file, digest(config.config_file))
    except OSError:
        fresh = True
    return untrusted_line(config) if fresh else None


def untrusted_line(config: Config) -> str:
    """What was ignored from the project's config.toml, and how to honour it."""
    return f"{config.config_file}: {untrusted_reason(config)}"


def untrusted_reason(config: Config) -> str:
    return (
        f"ignored {', '.join(config.ignored)} (this repository's settings are not trusted)"
        " — review the file, then run 'memdir trust' to use them"
    )
