"""The git repository a store lives in: finding it, setting up memory-aware merging, the
state of the last sync, and starting an automatic one.

A user's store is a repository of its own; a project's ``.memory/`` is a folder of the
project's repository. Setting up writes the store's ``.gitattributes`` (committed with it) and
registers memdir's merge drivers in the repository's own git config. This module does NOT
commit, merge or push (``sync`` does).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from memdir import jobs
from memdir import memory as memfmt
from memdir.config import SYNC_SETTINGS, Config, read_toml
from memdir.disk.atomic import private
from memdir.disk.layout import SYNC_STATE, state_dir
from memdir.disk.statefile import StateFile
from memdir.entry import INDEX_FILE
from memdir.errors import InvalidMemory, MemdirError, MemoryNotFound
from memdir.gate.trust import settings_file
from memdir.memfile import read_file
from memdir.memory import CONFLICT_KEY
from memdir.plan import Put
from memdir.store import MemoryStore
from memdir.store.base import users_gave
from memdir_git import guard
from memdir_git.git import Git, SyncError
from memdir_git.merge import conflict_of

ATTRIBUTES = ".gitattributes"
ATTRIBUTES_TEXT = (
    "# memdir merges memories field by field and renders MEMORY.md again after a merge\n"
    "*.md merge=memdir\n"
    f"/{INDEX_FILE} merge=memdir-index linguist-generated=true\n"
)
DRIVERS = {
    "memdir": ("memdir: merge memories field by field", ""),
    "memdir-index": ("memdir: MEMORY.md is rendered again after a merge", " --index"),
}


@dataclass(frozen=True)
class Where:
    """The repository a store lives in: ``rel`` is the store's folder from its top ("." when
    the store is the repository); ``owned``: the repository holds nothing but the store."""

    git: Git
    top: Path
    rel: str

    @property
    def owned(self) -> bool:
        return self.rel == "."

    def path(self, fname: str) -> str:
        """A store file's path from the top of the repository."""
        return fname if self.owned else f"{self.rel}/{fname}"


def state_of(root: Path) -> StateFile:
    return StateFile(state_dir(root) / SYNC_STATE)


def locate(root: Path) -> Where | None:
    """The repository the store at ``root`` is in, or None."""
    git = Git(root)
    top = git.top()
    if top is None:
        return None
    rel = os.path.relpath(root.resolve(), top.resolve())
    if rel.startswith(".."):
        return None
    return Where(Git(top), top, rel.replace(os.sep, "/"))


def need(root: Path) -> Where:
    where = locate(root)
    if where is None:
        raise SyncError(
            f"{root} is not in a git repository — run 'memdir sync --init URL' to make it one"
        )
    return where


def driver_command(index: bool = False) -> str:
    """The command git runs to merge a memory file (this installation's memdir)."""
    flag = " --index" if index else ""
    return f"{shlex.quote(sys.executable)} -m memdir merge-file{flag} %O %A %B %P"


def set_up(root: Path) -> bool:
    """Whether the store was set up to sync (its .gitattributes names memdir, or it synced)."""
    try:
        if "merge=memdir" in (root / ATTRIBUTES).read_text(encoding="utf-8"):
            return True
    except (OSError, UnicodeDecodeError):
        pass
    return (state_dir(root) / SYNC_STATE).exists()


def setup_problems(root: Path) -> list[str]:
    """What is missing for memory-aware merging in the store's repository (empty: all set):
    memdir's attributes in force (``info/attributes``, whatever a committed
    ``.gitattributes`` says) and its drivers registered in the repository's own config."""
    where = locate(root)
    if where is None:
        return []
    out = []
    if not guard.attributes_forced(where.git, where.rel):
        out.append(
            f"memdir's merge attributes are not in force in {where.top} (a .gitattributes may"
            " override them) — 'memdir sync' writes them into .git/info/attributes"
        )
    for name in DRIVERS:
        cmd = where.git.run("config", "--local", f"merge.{name}.driver", check=False).out.strip()
        exe = shlex.split(cmd)[0] if cmd else ""
        if not cmd or "merge-file" not in cmd or not Path(exe).exists():
            out.append(f"git's merge driver '{name}' is not registered in {where.top}")
    return out


def install(root: Path) -> list[str]:
    """Write the store's ``.gitattributes`` (for teammates' plain git), force memdir's
    attributes in the repository's ``info/attributes`` and register the drivers in its own
    git config; what was done."""
    where = need(root)
    done = []
    path = root / ATTRIBUTES
    try:
        attrs = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        attrs = ""
    if "merge=memdir" not in attrs:
        path.write_text(
            attrs + ("\n" if attrs and not attrs.endswith("\n") else "") + ATTRIBUTES_TEXT
        )
        done.append(f"wrote {path}")
    guard.force_attributes(where.git, where.rel)
    for name, (title, flag) in DRIVERS.items():
        wanted = driver_command(index=bool(flag))
        if (
            where.git.run("config", "--local", f"merge.{name}.driver", check=False).out.strip()
            != wanted
        ):
            where.git.run("config", "--local", f"merge.{name}.name", title)
            where.git.run("config", "--local", f"merge.{name}.driver", wanted)
            done.append(f"registered git's merge driver '{name}'")
    return done


def init(store: MemoryStore, url: str | None, *, remote: str = "origin") -> list[str]:
    """Make the store's folder a git repository (unless it is in one), set up merging, add
    ``url`` as ``remote``; what was done. The first ``sync`` then pulls and pushes."""
    root = store.root
    done = []
    if locate(root) is None:
        git = Git(root)
        git.run("init", "-q", "-b", "main")
        done.append(f"made {root} a git repository")
    where = need(root)
    done += install(root)
    if url:
        have = where.git.run("remote", "get-url", remote, check=False)
        if have.code != 0:
            where.git.run("remote", "add", remote, url)
            done.append(f"added remote {remote} = {url}")
        elif have.out.strip() != url:
            raise SyncError(
                f"remote {remote!r} already points to {have.out.strip()} — pass --remote"
                " with another name, or change it with 'git remote set-url'"
            )
    return done


def identity(git: Git) -> dict[str, str]:
    """Author variables for a commit when the person has not told git who they are."""
    if git.run("config", "user.email", check=False).out.strip():
        return {}
    host = socket.gethostname() or "localhost"
    return {
        "GIT_AUTHOR_NAME": "memdir",
        "GIT_AUTHOR_EMAIL": f"memdir@{host}",
        "GIT_COMMITTER_NAME": "memdir",
        "GIT_COMMITTER_EMAIL": f"memdir@{host}",
    }


def in_flight(where: Where) -> str | None:
    """What git operation the repository is in the middle of, if any."""
    gdir = where.git.git_dir()
    for marker, what in (
        ("MERGE_HEAD", "a merge"),
        ("rebase-merge", "a rebase"),
        ("rebase-apply", "a rebase"),
        ("CHERRY_PICK_HEAD", "a cherry-pick"),
        ("REVERT_HEAD", "a revert"),
    ):
        if (gdir / marker).exists():
            return what
    return None


def repair(where: Where, root: Path) -> None:
    """Clear the lock files a killed git left in the store's own repository (the index's,
    HEAD's, a branch's, packed-refs'…), after giving a git still at work a few seconds to
    finish; in a project's repository, say so."""
    gdir = where.git.git_dir()
    for _ in range(50):
        locks = _locks(gdir)
        if not locks:
            return
        try:
            if all(time.time() - lock.stat().st_mtime > 2 for lock in locks):
                break  # nobody has written them for a while
        except FileNotFoundError:  # one went: its git finished; look again
            pass
        time.sleep(0.1)
    if not where.owned:
        raise SyncError(
            f"{locks[0]} exists: another git command is running, or one was killed — if none"
            " is running, delete that file and sync again"
        )
    for lock in locks:  # only memdir works in this repository; we hold its lock
        lock.unlink(missing_ok=True)


def _locks(gdir: Path) -> list[Path]:
    """Git's lock files in a repository: beside HEAD and the index, and under refs/."""
    refs = gdir / "refs"
    return sorted([*gdir.glob("*.lock"), *(refs.rglob("*.lock") if refs.is_dir() else [])])


def note(root: Path, error: str | None) -> None:
    """Remember the outcome for ``doctor`` and the next automatic sync."""

    def change(s: dict[str, object]) -> None:
        s["last"] = memfmt.now()
        if error:
            s["error"] = error
        else:
            s.pop("error", None)
            s["ok"] = s["last"]

    with contextlib.suppress(OSError):
        state_of(root).update(change)


def status(root: Path) -> dict[str, object]:
    """The last sync's outcome (``ok``: when it last worked; ``error``: what failed since)."""
    return state_of(root).read()


def settings(root: Path, config: Config) -> Config:
    """The sync settings for the store at ``root``: the user's own store says them in its
    own config.toml (a private folder only the user writes), a project's in ``config``."""
    if root.resolve() == config.dir.resolve() or not private(root):
        return config
    source = settings_file(root / "config.toml")  # a remote's settings wait for the person
    try:
        own = read_toml(source) if source is not None and source.is_file() else {}
    except MemdirError:
        return config
    return dataclasses.replace(config, **{k: v for k, v in own.items() if k in SYNC_SETTINGS})


def kick(root: Path, config: Config, *, pull: bool = False) -> bool:
    """Start a background sync of the store at ``root`` when ``sync = "auto"`` (debounced;
    ``pull``: only if the last one is older than ``sync_interval``); whether one started."""
    config = settings(root, config)
    if config.sync != "auto" or not state_dir(root).is_dir() or locate(root) is None:
        return False
    if pull:
        last = str(status(root).get("last", ""))
        if last and last > _ago(config.sync_interval):
            return False
    try:
        jobs.enqueue(state_dir(root), "sync", start=root if config.background != "off" else None)
    except OSError:
        return False
    return True


def kick_all(roots: list[Path | None], config: Config, *, pull: bool = False) -> None:
    """``kick`` each store of ``roots`` (a session's project and user stores); never fails."""
    for root in roots:
        if root is not None:
            with contextlib.suppress(MemdirError, OSError):
                kick(root, config, pull=pull)


def _ago(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds))


def other_side(store: MemoryStore, name: str) -> str:
    """The text of the version a conflict kept aside (from history, else from git)."""
    mem = store.get(name)
    mark = conflict_of(mem)
    if mark is None:
        raise MemdirError(
            f"{name} has no conflict to resolve — 'memdir list' marks the ones that do"
        )
    other = str(mark.get("other", ""))
    texts = [_on_disk(store, mem)] + [
        store.version_text(name, v.version) for v in reversed(store.history(name))
    ]
    for text in texts:
        # the text itself (a sync kept it in history), or the other side of a file git left
        # its conflict markers in (here now, or kept in history once memdir wrote over it)
        sides = memfmt.git_sides(text) if "<<<<<<<" in text else None
        for candidate in (text,) if sides is None else (text, sides[1]):
            if other and memfmt.git_blob_id(candidate.encode()) == other:
                return candidate
    where = locate(store.root)
    data = where.git.blob(other) if where is not None and other else None
    if data is None:
        raise MemoryNotFound(
            f"the other version of {name} ({other[:12]}) is not here — sync first, or keep"
            " a version from 'memdir history {name}'"
        )
    return data.decode("utf-8")


_READ_MAX = 16 * 1024 * 1024  # what a snapshot reads of one file at most


def read_nofollow(path: Path) -> bytes | None:
    """A store file's bytes, never through a link (None: missing, a link or unreadable)."""
    try:
        return read_file(path, _READ_MAX)
    except InvalidMemory:
        return None


def _text(path: Path) -> str:
    """A store file's text, never through a link ("" when it cannot be read)."""
    try:
        return (read_nofollow(path) or b"").decode("utf-8")
    except UnicodeDecodeError:
        return ""


def _on_disk(store: MemoryStore, mem: memfmt.Memory) -> str:
    """The text of ``mem``'s file as it is now ("" when it cannot be read)."""
    return _text(store.root / (mem.path or f"{mem.name}.md"))


def _mark_merged(store: MemoryStore, mem: memfmt.Memory) -> None:
    """Tell git the file it left conflict markers in is settled (``git add``), as resolving
    a conflict in git does, and MEMORY.md with it once memdir has written it again from the
    files; nothing for a file git does not count unmerged."""
    where = locate(store.root)
    if where is None:
        return
    for fname in (mem.path or f"{mem.name}.md", INDEX_FILE):
        path = where.path(fname)
        unmerged = where.git.run("ls-files", "--unmerged", "--", path, check=False).out.strip()
        if unmerged and memfmt.git_sides(_text(store.root / fname)) is None:
            where.git.run("add", "--", path)


def resolve(
    store: MemoryStore, name: str, keep: str = "ours", *, source: str = "cli"
) -> tuple[str, bool]:
    """Clear the conflict mark of ``name``, keeping the current version ("ours"), the other
    one ("theirs") or a history version ("3", "v3"); what was kept, and whether it is the
    user's own. Choosing a text is not taking it as one's own: a text the user did not give
    before (the other side, a teammate's) is written as from elsewhere (``sync``, or
    ``resolve`` for a version from history) and waits for ``memdir accept`` like any other."""
    mem = store.get(name)
    if conflict_of(mem) is None:
        raise MemdirError(
            f"{name} has no conflict to resolve — 'memdir list' marks the ones that do"
        )
    keep = {"current": "ours", "mine": "ours", "other": "theirs"}.get(keep, keep)
    if keep == "ours":
        chosen, what = mem, "the current version"
    elif keep == "theirs":
        chosen, what = memfmt.loads(other_side(store, name)), "the other version"
    else:
        number = int(keep.lstrip("v")) if keep.lstrip("v").isdigit() else None
        if number is None:
            raise MemdirError(
                f"--keep {keep!r}: use current (the text here now), other (the version the"
                " other side wrote) or a version number (v3)"
            )
        chosen, what = memfmt.loads(store.version_text(name, number)), f"version {number}"
    extra = {k: v for k, v in chosen.extra.items() if k != CONFLICT_KEY}
    users = users_gave(store, mem.name, chosen)
    store.apply(
        [
            Put(
                chosen.replace(name=mem.name, extra=extra, updated=None),
                expect=mem.digest,
                merge_extra=False,
                reason=f"resolved: kept {what}",
            )
        ],
        source=source if users else "sync" if keep == "theirs" else "resolve",
        summary=f"resolve {mem.name}",
        secrets="allow",
    )
    if memfmt.git_conflicted(mem):
        _mark_merged(store, mem)
    return what, users
