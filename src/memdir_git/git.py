"""Running the ``git`` command, with its failures said in one line that names the fix.

memdir never reimplements git: it runs the ``git`` a person has, in the repository a store
lives in, and maps what git prints on failure (no git, no remote, authentication, a remote
that cannot be reached, a rejected push) to a ``SyncError``.
This module does NOT know what a memory is.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memdir.errors import MemdirError


class SyncError(MemdirError):
    """Git could not do what sync asked; the message says how to fix it."""


class PushRejected(SyncError):
    """The remote moved on since the last fetch (fetch, merge and push again)."""


class Offline(SyncError):
    """The remote could not be reached; nothing is lost, the next sync pushes."""


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str
    data: bytes = b""  # the standard output's bytes (with ``raw``)


_ENV = {
    "GIT_TERMINAL_PROMPT": "0",  # never wait for a password nobody will type
    "GIT_MERGE_AUTOEDIT": "no",
    "LC_ALL": "C",  # messages matched below are git's English ones
}


def _explain(args: Sequence[str], err: str, remote: str | None) -> SyncError:
    """The failure of ``git args`` as one line that says what to do."""
    low = err.lower()
    first = next((line.strip() for line in err.splitlines() if line.strip()), "failed")
    where = f"remote {remote!r}" if remote else "the remote"
    if "does not appear to be a git repository" in low or "no such remote" in low:
        return SyncError(
            f"{where} is not set up or is not a git repository — check 'git remote -v', or"
            " run 'memdir sync --init URL'"
        )
    if (
        "authentication failed" in low
        or "permission denied" in low
        or "could not read username" in low
        or "terminal prompts disabled" in low
    ):
        return SyncError(
            f"git could not log in to {where} ({first}) — set up an SSH key or a credential"
            " helper so that 'git fetch' works without a prompt"
        )
    if (
        "could not resolve host" in low
        or "connection refused" in low
        or "network is unreachable" in low
        or "timed out" in low
        or "unable to access" in low
        or "could not read from remote" in low
    ):
        return Offline(
            f"cannot reach {where} ({first}) — nothing is lost: the changes are committed"
            " here and the next 'memdir sync' pushes them"
        )
    if (
        "[rejected]" in low
        or "non-fast-forward" in low
        or "fetch first" in low
        or ("cannot lock ref" in low and "but expected" in low)  # moved while we pushed
    ):
        return PushRejected(f"the push to {where} was rejected: it has changes this clone lacks")
    if "would be overwritten by merge" in low:
        files = [ln.strip() for ln in err.splitlines() if ln.startswith(("\t", "    "))]
        return SyncError(
            f"pulling would overwrite your uncommitted changes to {files[0] if files else 'a file'}"
            " — commit or stash them, then sync (your memory changes are committed)"
        )
    stale = re.search(r"unable to create '([^']+\.lock)': file exists", err, re.IGNORECASE)
    if stale:
        return SyncError(
            f"git found the lock file {stale.group(1)} (a git command still running, or one"
            " that was killed) — if none is running, delete that file and sync again"
        )
    return SyncError(f"git {' '.join(args[:2])} failed: {first}")


class Git:
    """The ``git`` command run in one working tree."""

    def __init__(self, cwd: Path, env: dict[str, str] | None = None) -> None:
        if shutil.which("git") is None:
            raise SyncError("git is not installed — install it (apt install git, brew install git)")
        self.cwd = cwd
        self.env = dict(env or {})  # for every call (a commit's identity), never os.environ

    def run(
        self,
        *args: str,
        check: bool = True,
        remote: str | None = None,
        input: bytes | None = None,
        env: dict[str, str] | None = None,
        raw: bool = False,
    ) -> Result:
        """Run ``git args`` (``env``: variables for this call alone, on top of the process's);
        SyncError (explained) when it fails and ``check``."""
        env = {**os.environ, **self.env, **(env or {}), **_ENV}
        try:
            proc = subprocess.run(
                ["git", *args],
                cwd=self.cwd,
                input=input,
                capture_output=True,
                env=env,
                timeout=600,
            )
        except subprocess.TimeoutExpired:
            raise Offline(
                f"git {args[0]} took over 10 minutes — check the network; nothing is lost"
            ) from None
        out = proc.stdout.decode("utf-8", "replace")
        err = proc.stderr.decode("utf-8", "replace")
        if check and proc.returncode != 0:
            raise _explain(args, err or out, remote)
        return Result(proc.returncode, out, err, proc.stdout if raw else b"")

    def out(self, *args: str) -> str:
        """The standard output of ``git args``, stripped."""
        return self.run(*args).out.strip()

    def blob(self, ref: str) -> bytes | None:
        """The bytes of ``ref`` (``HEAD:path``, ``:2:path``, a blob id), or None."""
        res = self.run("cat-file", "blob", ref, check=False, raw=True)
        return res.data if res.code == 0 else None

    def top(self) -> Path | None:
        """The top folder of the repository ``cwd`` is in, or None."""
        res = self.run("rev-parse", "--show-toplevel", check=False)
        return Path(res.out.strip()) if res.code == 0 else None

    def git_dir(self) -> Path:
        return Path(self.out("rev-parse", "--absolute-git-dir"))
