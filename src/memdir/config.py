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
from .gate.trust import USER_CONFIG, TrustList, config_home, digest, inside, settings_file

# what an untrusted notice says of a config.toml that a sync brought and nobody accepted yet
PULLED_NOTE = "the settings a sync brought (the file's earlier settings apply)"

DEFAULT_TYPES = ("user_preference", "project_fact", "feedback", "reference")
# the types that stand in every session whatever the question: about the person and how to work
STANDING_TYPES = ("user_preference", "feedback")


def standing_kind(type_: str, pinned: bool) -> bool:
    """Whether a memory of this type, pinned or not, is a rule given at every session start."""
    return pinned or type_ in STANDING_TYPES


DEFAULT_MODELS = {
    "anthropic": ("claude-sonnet-5-5", "claude-haiku-5-5"),
    "openai": ("gpt-5.5", "gpt-5.4-mini"),
}


@dataclass(frozen=True)
class Setting:
    """What a setting is beside its type and default (declared with its ``Config`` field):
    its environment variable, its choices, whether only the user may make it (``sensitive``:
    a project's file counts only once trusted, a store's own file never), how an untrusted
    project file may still move it (``tighten``: "lower", "higher" or the values allowed),
    whether it is plainly the project's own business (``project``: any value), whether it
    governs sync (a user store's own config.toml says it) and whether config.toml may hold
    it at all (``toml``)."""

    env: str | None = None
    choices: tuple[str, ...] = ()
    sensitive: bool = False
    tighten: str | tuple[Any, ...] | None = None
    project: bool = False
    sync: bool = False
    toml: bool = True


def setting(default: Any, *, repr: bool = True, **meta: Any) -> Any:
    """A ``Config`` field: its default, and what ``Setting`` says of it."""
    return field(default=default, repr=repr, metadata={"memdir": Setting(**meta)})


EMBEDDERS = ("auto", "none", "minilm", "e5", "http")
SYNC_MODES = ("off", "auto")
LOWER, HIGHER = "lower", "higher"  # an untrusted project file may only lower / raise it


@dataclass(frozen=True)
class Config:
    """Every setting memdir reads, with its default: the one table of settings. Each field
    declares its type, default and ``Setting`` (environment variable, choices, trust, what
    an untrusted project file may do); ``SETTINGS`` and the lists below are read from it."""

    dir: Path = setting(Path(".memory"), env="MEMDIR_DIR", toml=False)
    dir_source: str = "default"  # how ``dir`` was found: flag, env, found (upward), git (the
    # top of the repository, no store yet) or default (the working folder, no store yet)
    types: tuple[str, ...] = setting(DEFAULT_TYPES, project=True)
    provider: str | None = setting(None, env="MEMDIR_PROVIDER", sensitive=True)
    model: str | None = setting(None, env="MEMDIR_MODEL")
    memory_model: str | None = setting(None, env="MEMDIR_MEMORY_MODEL")
    api_key: str | None = setting(None, env="MEMDIR_API_KEY", toml=False, repr=False)
    base_url: str | None = setting(None, env="MEMDIR_BASE_URL", sensitive=True)
    timeout: float = setting(60.0, env="MEMDIR_TIMEOUT", tighten=LOWER)
    max_retries: int = setting(2, env="MEMDIR_MAX_RETRIES", tighten=LOWER)
    lock_timeout: float = setting(30.0, tighten=HIGHER)  # a project may make writers wait longer
    max_file_bytes: int = setting(256 * 1024, tighten=LOWER)
    recall_max_items: int = setting(5, tighten=LOWER)
    recall_token_budget: int = setting(2000, env="MEMDIR_RECALL_TOKEN_BUDGET", tighten=LOWER)
    # the chat model's context window; 0: asked of its server, or known (a smaller window
    # refuses sooner: never sends more)
    context_tokens: int = setting(0, env="MEMDIR_CONTEXT_TOKENS", tighten=LOWER)
    standing_token_budget: int = setting(1200, tighten=LOWER)  # the rules at a session start
    # the whole session-start block (rules and index): the index shrinks first
    session_token_budget: int = setting(3000, tighten=LOWER)
    recall_history_chars: int = setting(4000, tighten=LOWER)
    select_catalogue_max: int = setting(200, tighten=LOWER)
    index_max_lines: int = setting(200, project=True)
    index_max_bytes: int = setting(25_000, project=True)
    consolidate_threshold: int = setting(50, env="MEMDIR_CONSOLIDATE_THRESHOLD", tighten=HIGHER)
    consolidate_cooldown: int = setting(10, tighten=HIGHER)
    consolidate_max_retire_share: float = setting(0.3, tighten=LOWER)
    consolidate_batch: int = setting(60, tighten=LOWER)
    consolidate_max_calls: int = setting(4, tighten=LOWER)  # per automatic run; the rest waits
    # automatic runs: "apply", "propose" (review), "auto"
    consolidate_auto: str = setting(
        "auto", choices=("auto", "apply", "propose"), tighten=("propose",)
    )
    allow: tuple[str, ...] = setting((), sensitive=True)  # agent approvals: "bash:pytest*"
    # "memories", "facts", or "auto" (facts for local endpoints)
    extract_style: str = setting("auto", choices=("auto", "memories", "facts"), project=True)
    # "lexical", "none", or "auto" (lexical for local endpoints)
    select_guard: str = setting("auto", choices=("auto", "lexical", "none"), tighten=("lexical",))
    # who picks the memories recall adds: "model" or "search" (no model call: costs nothing)
    recall_select: str = setting("model", choices=("model", "search"), tighten=("search",))
    hook_budget: float = setting(2.0, tighten=LOWER)  # seconds the prompt hook gives the model
    # of that budget, the share the model may take once search has answered: a slow model
    # never costs the whole budget
    hook_model_wait: float = setting(0.5, tighten=LOWER)
    # seconds a command's search embeds new memories; then background
    embed_budget: float = setting(3.0, tighten=LOWER)
    # "auto" (MiniLM if memdir[embed] is installed), minilm, e5, http, none
    embedder: str = setting("auto", env="MEMDIR_EMBEDDER", choices=EMBEDDERS, sensitive=True)
    # the endpoint's model ("http"), or an ONNX file ("minilm")
    embed_model: str | None = setting(None, env="MEMDIR_EMBED_MODEL", sensitive=True)
    # an OpenAI-compatible base URL for "http" (default: base_url)
    embed_url: str | None = setting(None, env="MEMDIR_EMBED_URL", sensitive=True)
    embed_api_key: str | None = setting(None, env="MEMDIR_EMBED_API_KEY", toml=False, repr=False)
    # the user's own store ("none": no user scope); see scopes.py
    user_dir: Path | None = setting(None, env="MEMDIR_USER_DIR", sensitive=True)
    read_only: tuple[str, ...] = setting((), sensitive=True)  # shared stores recalled from
    # "ask": learned changes wait for a person (memdir review, memdir ui)
    review: str = setting("auto", choices=("auto", "ask"), tighten=("ask",))
    # keep a bounded log of what was recalled for which prompt and why
    recall_log: bool = setting(True, tighten=(True,))
    # "off": memdir starts no process in the background; queued work waits for 'memdir work --all'
    background: str = setting(
        "auto", env="MEMDIR_BACKGROUND", choices=("auto", "off"), tighten=("off",)
    )
    # search recalls only what is evidence for the prompt (close in meaning, or holding its
    # terms): nothing for a prompt the store cannot answer
    recall_floor: bool = setting(True, tighten=(True,))
    # keep what was said (dated turns) beside what was learned from it
    episodes: bool = setting(True, project=True)
    episodes_keep_days: int = setting(90, tighten=LOWER)
    episodes_max_bytes: int = setting(20 * 1024 * 1024, tighten=LOWER)
    recall_episodes: int = setting(2, tighten=LOWER)  # turns recall may add beside the memories
    # turns said after / before each of them that come with it (the answer, what it answers)
    recall_episode_after: int = setting(1, project=True)
    recall_episode_before: int = setting(0, project=True)
    # "auto": pull when a session starts, commit and push after learning (pushes the store
    # to a remote by itself: the user's to choose)
    sync: str = setting("off", choices=SYNC_MODES, sensitive=True, sync=True)
    # seconds an automatic sync waits for more changes
    sync_debounce: float = setting(10.0, project=True, sync=True)
    # a session start pulls if the last sync is older than this
    sync_interval: float = setting(300.0, project=True, sync=True)
    # PostgreSQL: where every memory is read from and written to
    database_url: str | None = setting(None, env="MEMDIR_DATABASE_URL", sensitive=True, repr=False)
    store: str = setting("default", env="MEMDIR_STORE", sensitive=True)  # its namespace there
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
_INTERNAL = Setting(toml=False)  # a field that is not a setting (how the others were found)
SETTINGS: dict[str, Setting] = {
    f.name: f.metadata.get("memdir", _INTERNAL) for f in dataclasses.fields(Config)
}
_ENV = {s.env: name for name, s in SETTINGS.items() if s.env}
_SECRET = {name for name, s in SETTINGS.items() if not s.toml}  # never from config.toml
CHOICES = {name: s.choices for name, s in SETTINGS.items() if s.choices}
# Settings that send data or keys somewhere, or grant the agent permissions: only the user
# makes them (a project's file once trusted; a store's own config.toml never).
SENSITIVE = frozenset(name for name, s in SETTINGS.items() if s.sensitive)
# What an untrusted project file may still set, and in which direction: only to tighten a
# guard or spend less ("lower": at most what is otherwise in force; "higher": at least;
# a tuple: only these values). Any other setting that is not plainly about the project
# (model names, timeouts, budgets, styles) counts only once the file is trusted.
TIGHTEN = {name: s.tighten for name, s in SETTINGS.items() if s.tighten is not None}
PROJECT_OWN = frozenset(name for name, s in SETTINGS.items() if s.project)  # any value
SYNC_SETTINGS = tuple(name for name, s in SETTINGS.items() if s.sync)
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
    return parse_toml(_read(path), path)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read ({exc.strerror}) — fix its permissions") from None


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


def _tightens(key: str, value: Any, current: Any) -> bool:
    rule = TIGHTEN[key]
    if isinstance(rule, tuple):
        return value in rule or value == current
    return bool(value <= current) if rule == LOWER else bool(value >= current)


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
    raw = _read(path)
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


def folder(kind: str) -> Path:
    """The user's folder of ``kind`` ("data", "cache", "state") for memdir: the platform's
    (``XDG_*_HOME`` on Linux)."""
    import platformdirs

    where = getattr(platformdirs, f"user_{kind}_dir")
    return Path(where("memdir", appauthor=False))


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
