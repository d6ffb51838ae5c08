"""Where a command finds the project's store: never above the repository it runs in, and a
command for the user's own store leaves project stores alone."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from machines import Machine
from memdir import MemoryStore


@pytest.mark.slow
def test_a_store_above_the_repository_does_not_capture_its_facts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A .memory in a parent of a repository is not that repository's: a project fact goes
    to the repository's own store, at its top."""
    MemoryStore(tmp_path / ".memory").write(
        "outer", type="project_fact", description="Outer", body="outer"
    )
    cli = Machine(tmp_path, "me", monkeypatch)
    repo = tmp_path / "work" / "repo"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    r = cli("add", "api-port", "--type", "project_fact", "-d", "The API port", "--body", "8080",
            cwd=repo / "src")  # fmt: skip
    assert r.code == 0, r.err
    assert (repo / ".memory" / "api-port.md").is_file()
    assert not (tmp_path / ".memory" / "api-port.md").exists()
    assert "api-port" in cli("list", cwd=repo).out and "outer" not in cli("list", cwd=repo).out


@pytest.mark.slow
def test_user_scope_commands_create_no_project_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'memdir add --type user_preference' and 'memdir sync --scope user --init URL' in a
    folder without a store write to the user's store only."""
    cli = Machine(tmp_path, "me", monkeypatch)
    here = tmp_path / "somewhere"
    here.mkdir()
    r = cli("add", "tabs", "--type", "user_preference", "-d", "Tabs", "--body", "Tabs.", cwd=here)
    assert r.code == 0, r.err
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    r = cli("sync", "--scope", "user", "--init", str(remote), cwd=here)
    assert r.code == 0, r.err
    assert not (here / ".memory").exists()
