"""Machines that sync a user store through git: each has its own user store and working
folder, and runs ``memdir`` in-process (or as a process of its own); a bare remote in a
temporary folder stands for the server they share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir import MemoryStore
from memdir.cli.main import main

from conftest import Result, child_env


def git(cwd: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=_git_env())
    if check and proc.returncode != 0:
        raise AssertionError(f"git {args}: {proc.stderr}")
    return proc.stdout


def _git_env() -> dict[str, str]:
    return dict(
        os.environ,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@t",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@t",
    )


class Machine:
    """One machine: its own user store (``memdir --scope user``) and working folder."""

    def __init__(self, tmp: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.home = tmp / name
        self.home.mkdir()
        self.user = self.home / "memories"
        self.mp = monkeypatch

    def __call__(self, *args: str, cwd: Path | None = None) -> Result:
        runner = CliRunner()
        self.mp.chdir(cwd or self.home)
        with runner.isolation(env={"MEMDIR_USER_DIR": str(self.user)}) as (out, err, _):
            try:
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return Result(code, out.getvalue().decode(), err.getvalue().decode())

    def ok(self, *args: str, cwd: Path | None = None) -> str:
        res = self(*args, cwd=cwd)
        assert res.code == 0, res.err
        return res.out

    def add(self, name: str, body: str, description: str = "") -> None:
        self.ok(
            "add", "--scope", "user", name, "--type", "user_preference",
            "-d", description or f"About {name}", "--body", body,
        )  # fmt: skip

    def store(self) -> MemoryStore:
        return MemoryStore(self.user)

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        """``memdir ARGS`` on this machine as a process of its own (a session of its own, so
        that a test can kill it with everything it started)."""
        return subprocess.Popen(
            [sys.executable, "-m", "memdir", *args],
            env=dict(child_env(), MEMDIR_USER_DIR=str(self.user)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )


def files(root: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(root.glob("*.md"))}
