"""Whose settings count: the user's own configuration, and the repositories the user trusts.

A project's ``.memory/config.toml`` arrives with the repository, written by whoever wrote the
repository. The settings that decide where data and credentials go (``provider``,
``base_url``, ``embedder``, ``embed_url``, ``embed_model``, ``user_dir``, a ``read_only`` store
outside the project) and the ones that grant permissions (``allow``) are honoured only from the
user's own configuration (``<user config folder>/config.toml``, the environment, flags), or
from a project file the user trusted (``memdir trust``), remembered by the file's path and the
SHA-256 of its content: an edited file is untrusted again until the user looks at it.

The trust list lives in the user's configuration folder (``~/.config/memdir/trusted.json`` on
Linux; ``MEMDIR_CONFIG_DIR`` moves it), written owner-only. It also remembers which ignored
files were already announced, so a person is told once per content, not on every command.
This module does NOT parse settings (``config`` does) and does NOT print anything.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..disk.layout import SYNC_STATE, state_dir
from ..disk.statefile import StateFile

TRUST_FILE = "trusted.json"
PULLED_CONFIG = "pulled_config"  # sync.json: the SHA-256 of a config.toml a sync brought
USER_CONFIG = "config.toml"


def config_home(environ: Mapping[str, str]) -> Path:
    """The user's memdir configuration folder (``MEMDIR_CONFIG_DIR``, else the platform's)."""
    given = environ.get("MEMDIR_CONFIG_DIR")
    if given:
        return Path(os.path.expanduser(given))
    import platformdirs

    return Path(platformdirs.user_config_dir("memdir", appauthor=False))


def digest(path: Path) -> str:
    """The SHA-256 of a file's bytes (what trust is granted to)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pulled(path: Path) -> bool:
    """Whether the store's ``config.toml`` at ``path`` is as a sync brought it from a remote
    and nobody here accepted it yet (``accept_pulled``) or edited it since."""
    mark = StateFile(state_dir(path.parent) / SYNC_STATE).read().get(PULLED_CONFIG)
    if not mark:
        return False
    try:
        return digest(path) == str(mark)
    except OSError:
        return False


# in the state folder: the config.toml as it was before a sync replaced it
ACCEPTED_COPY = "config-accepted.toml"


def settings_file(path: Path) -> Path | None:
    """The file whose settings apply for the store config.toml at ``path``: itself, or while
    a sync's version waits to be accepted the one it replaced (None: there was none)."""
    if not pulled(path):
        return path
    copy = state_dir(path.parent) / ACCEPTED_COPY
    return copy if copy.is_file() else None


def accept_pulled(path: Path) -> bool:
    """Accept a config.toml a sync brought (its settings apply from now on); whether it was
    waiting."""
    state = StateFile(state_dir(path.parent) / SYNC_STATE)
    if not state.read().get(PULLED_CONFIG):
        return False
    state.update(lambda s: s.pop(PULLED_CONFIG, None))
    (state_dir(path.parent) / ACCEPTED_COPY).unlink(missing_ok=True)
    return True


def inside(path: Path, folder: Path) -> bool:
    """Whether ``path``, links resolved, lies within ``folder`` (links resolved)."""
    real, base = os.path.realpath(path), os.path.realpath(folder)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class Grant:
    """One trusted file: its path, the content hash trusted, and when."""

    path: str
    sha256: str
    when: str


class TrustList:
    """The user's trusted project configuration files (tolerant of a missing or damaged file:
    nothing is trusted then)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / TRUST_FILE
        self.file = StateFile(self.path, mode=0o600)
        raw = self.file.read()
        self._data: dict[str, dict[str, dict[str, str]]] = {
            part: {str(k): v for k, v in raw.get(part, {}).items() if isinstance(v, dict)}
            if isinstance(raw.get(part), dict)
            else {}
            for part in ("trusted", "announced")
        }

    @staticmethod
    def key(path: Path) -> str:
        """The project file's own path (a link elsewhere is not the file it points to)."""
        return os.path.abspath(path)

    def trusts(self, path: Path, sha256: str) -> bool:
        return self._data["trusted"].get(self.key(path), {}).get("sha256") == sha256

    def grants(self) -> list[Grant]:
        return [
            Grant(k, str(v.get("sha256", "")), str(v.get("when", "")))
            for k, v in sorted(self._data["trusted"].items())
        ]

    def trust(self, path: Path, sha256: str) -> None:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._save("trusted", self.key(path), {"sha256": sha256, "when": when})

    def revoke(self, path: Path) -> bool:
        """Forget the grant for ``path``; False if there was none."""
        found = self.key(path) in self._data["trusted"]
        if found:
            self._save("trusted", self.key(path), None)
        return found

    def announce(self, path: Path, sha256: str) -> bool:
        """Record that the ignored settings of this content were shown; False if they had
        been already (so the caller stays quiet)."""
        key = self.key(path)
        if self._data["announced"].get(key, {}).get("sha256") == sha256:
            return False
        with contextlib.suppress(OSError):
            self._save("announced", key, {"sha256": sha256})
        return True

    def _save(self, part: str, key: str, entry: dict[str, str] | None) -> None:
        """Change one entry on disk, under the file's lock: another process's change to
        another entry meanwhile is kept."""
        if entry is None:
            self._data[part].pop(key, None)
        else:
            self._data[part][key] = entry
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self.file.changing() as state:
            entries = state.get(part)
            if not isinstance(entries, dict):
                entries = state[part] = {}
            if entry is None:
                entries.pop(key, None)
            else:
                entries[key] = entry
