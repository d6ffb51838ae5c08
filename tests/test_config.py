"""Configuration: defaults < config.toml < environment < flags, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from memdir.config import Config, load_config
from memdir.errors import ConfigError

from conftest import CliFn, trust


def test_precedence(tmp_path: Path) -> None:
    """config.toml overrides defaults, the environment overrides it, flags override both (a
    project file's model names count once the file is trusted: they cost money)."""
    store = tmp_path / "m"
    store.mkdir()
    (store / "config.toml").write_text(
        'model = "from-toml"\nmemory_model = "small-toml"\nconsolidate_threshold = 80\n'
    )
    assert load_config(environ={"MEMDIR_DIR": str(store)}).model is None
    trust(store / "config.toml")
    env = {"MEMDIR_DIR": str(store), "MEMDIR_MODEL": "from-env", "ANTHROPIC_API_KEY": "k"}
    cfg = load_config({"memory_model": "small-flag"}, environ=env)
    assert (cfg.model, cfg.memory_model, cfg.consolidate_threshold) == (
        "from-env",
        "small-flag",
        80,
    )
    assert cfg.provider == "anthropic" and cfg.api_key == "k"
    assert load_config(environ={"MEMDIR_DIR": str(store)}).model == "from-toml"


def test_with_a_database_dir_names_the_state_folder_and_an_empty_db_means_files(
    tmp_path: Path,
) -> None:
    """With ``MEMDIR_DATABASE_URL`` set, ``--dir F`` is this host's folder for that store (its
    config.toml and local state), the memories stay in the database; ``--db ''`` keeps them in
    files for one command."""
    env = {"MEMDIR_DATABASE_URL": "postgresql://u@127.0.0.1/db"}
    folder = tmp_path / "notes"
    with_dir = load_config({"dir": str(folder)}, environ=env)
    assert with_dir.database_url == env["MEMDIR_DATABASE_URL"] and with_dir.dir == folder
    assert load_config({"dir": str(folder), "database_url": ""}, environ=env).database_url is None


def test_defaults_per_provider() -> None:
    """Sensible default models; the memory model follows an explicitly chosen main model."""
    assert Config(provider="anthropic").chat_model.startswith("claude-")
    assert Config(provider="openai").memory_model_name.startswith("gpt-")
    assert Config(provider="openai", model="llama3.2").memory_model_name == "llama3.2"


def test_openai_picked_from_its_environment() -> None:
    """OPENAI_BASE_URL alone selects the openai provider (a local server needs no key)."""
    cfg = load_config(environ={"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"})
    assert (cfg.provider, cfg.base_url, cfg.api_key) == (
        "openai",
        "http://127.0.0.1:11434/v1",
        None,
    )


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("model = ", "is not valid TOML"),
        ('colour = "blue"\n', "unknown setting 'colour'"),
        ('timeout = "soon"\n', "timeout = 'soon' is not valid"),
        ('select_guard = "strict"\n', "select_guard = 'strict' is not valid — use \"auto\""),
        ('extract_style = "prose"\n', "extract_style = 'prose' is not valid"),
        ('review = "never"\n', 'review = \'never\' is not valid — use "auto" or "ask"'),
    ],
)
def test_bad_config_file(tmp_path: Path, toml: str, message: str) -> None:
    """A broken config.toml is one clear error naming the file."""
    (tmp_path / "config.toml").write_text(toml)
    with pytest.raises(ConfigError, match=message):
        load_config(environ={"MEMDIR_DIR": str(tmp_path)})


def test_unknown_provider_cli(cli: CliFn) -> None:
    """An unknown MEMDIR_PROVIDER is a one-line error from any command."""
    r = cli("list", env={"MEMDIR_PROVIDER": "cohere"})
    assert (r.code, r.err) == (
        1,
        "memdir: error: unknown provider 'cohere' — set"
        " MEMDIR_PROVIDER to one of anthropic, openai, claude-code,"
        " codex\n",
    )


def test_a_store_opened_in_python_reads_its_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MemoryStore(path) reads the store's config.toml; the environment is read only at an
    entry point (load_config), never below it."""
    from memdir import MemoryStore
    from memdir.errors import InvalidMemory

    root = tmp_path / ".memory"
    root.mkdir()
    (root / "config.toml").write_text('types = ["note"]\nmax_file_bytes = 2048\n')
    store = MemoryStore(root)
    assert store.config.types == ("note",) and store.config.max_file_bytes == 2048
    with pytest.raises(InvalidMemory):
        store.write("x", type="project_fact", description="d", body="b")
    monkeypatch.setenv("MEMDIR_EMBEDDER", "none")
    assert MemoryStore(root).config.embedder == "auto"  # no environment below an entry point
    assert MemoryStore(root, load_config({"dir": root})).config.embedder == "none"
    explicit = MemoryStore(root, Config(dir=root))  # a given configuration is used as it is
    assert explicit.config.types != ("note",)
    (root / "config.toml").write_text("types = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        MemoryStore(root)


def _sample(name: str) -> tuple[str, object]:
    """A valid raw value for setting ``name`` and what it becomes in ``Config``."""
    from memdir.config import _FIELDS, SETTINGS

    meta, default = SETTINGS[name], _FIELDS[name].default
    if meta.choices:
        pick = next(c for c in meta.choices if c != default)
        return pick, pick
    if name in ("dir", "user_dir"):
        return "/tmp/somewhere", Path("/tmp/somewhere")
    if name == "database_url":
        return "postgresql://h/db", "postgresql://h/db"
    if name == "provider":  # checked against PROVIDERS once every source is read
        return "openai", "openai"
    if isinstance(default, bool):
        return ("false", False) if default else ("true", True)
    if isinstance(default, int):
        return "7", 7
    if isinstance(default, float):
        return "7.5", 7.5
    return "s1", "s1"


def _env_settings() -> list[str]:
    from memdir.config import SETTINGS

    return [name for name, s in SETTINGS.items() if s.env]


@pytest.mark.parametrize("name", _env_settings())
def test_every_declared_environment_variable_sets_its_setting(name: str, tmp_path: Path) -> None:
    """Each setting's environment variable, as the settings table declares it, sets that
    setting (and no other list has to be kept by hand for it to work)."""
    from memdir.config import SETTINGS

    raw, want = _sample(name)
    env = {"MEMDIR_CONFIG_DIR": str(tmp_path / "cfg"), str(SETTINGS[name].env): raw}
    if name != "dir":
        env["MEMDIR_DIR"] = str(tmp_path / "m")
    assert getattr(load_config(environ=env), name) == want


def test_the_trust_lists_come_from_the_settings_table(tmp_path: Path) -> None:
    """What only the user may set, and what an untrusted project file may only tighten, are
    read from the table: a sensitive setting in an untrusted project file is ignored, a
    tightening one applies, a loosening one is ignored."""
    from memdir.config import SENSITIVE, SETTINGS, TIGHTEN

    assert {n for n, s in SETTINGS.items() if s.sensitive} == SENSITIVE
    assert {"database_url", "embed_url", "allow", "sync"} <= SENSITIVE
    assert TIGHTEN["recall_token_budget"] == "lower" and TIGHTEN["review"] == ("ask",)
    store = tmp_path / "m"
    store.mkdir()
    (store / "config.toml").write_text(
        'embed_url = "http://evil.example/v1"\nrecall_token_budget = 100\nmax_retries = 9\n'
    )
    cfg = load_config(environ={"MEMDIR_DIR": str(store), "MEMDIR_CONFIG_DIR": str(tmp_path)})
    assert (cfg.embed_url, cfg.recall_token_budget, cfg.max_retries) == (None, 100, 2)
    assert set(cfg.ignored) == {"embed_url", "max_retries"}


def test_a_project_file_cannot_make_writes_fail_or_recall_flood(tmp_path: Path) -> None:
    """An untrusted project file that sets a lock timeout of a millisecond (every write past
    a moment's contention would fail) or a thousand recalled turns is ignored; raising the
    wait and lowering the turns still apply."""
    store = tmp_path / "m"
    store.mkdir()
    env = {"MEMDIR_DIR": str(store), "MEMDIR_CONFIG_DIR": str(tmp_path)}
    (store / "config.toml").write_text("lock_timeout = 0.001\nrecall_episodes = 1000\n")
    cfg = load_config(environ=env)
    assert (cfg.lock_timeout, cfg.recall_episodes) == (30.0, 2)
    assert {"lock_timeout", "recall_episodes"} <= set(cfg.ignored)
    (store / "config.toml").write_text("lock_timeout = 120\nrecall_episodes = 1\n")
    cfg = load_config(environ=env)
    assert (cfg.lock_timeout, cfg.recall_episodes) == (120.0, 1)
