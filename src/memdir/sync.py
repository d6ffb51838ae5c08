"""Syncing a store through git: commit, fetch, merge memories (not lines), push.

A store is synced in the git repository it lives in: the user's store is a repository of its
own (``init`` makes it one), a project's ``.memory/`` is a folder of the project's repository,
of which sync commits nothing else. Git merges memory files with memdir's driver
(``memmerge``: field by field; a real conflict keeps one side current, the other in history,
and marks the memory ``conflict:``) and never merges ``MEMORY.md``: it is rendered again from
the merged files. What a merge changed goes into memdir's history and log (``adopt``), so
``memdir history`` and ``undo`` know about it. Sync is safe to kill at any point: a merge it
started is finished by the next one, and nothing is pushed that was not committed.
This module does NOT parse the command line.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from . import memory as memfmt
from .config import Config
from .errors import MemdirError, SecretFound
from .gitcmd import Offline, PushRejected, SyncError
from .index import INDEX_FILE
from .layout import INTERNAL, SYNC_LOCK
from .memmerge import conflict_of, merge
from .plan import Put, screen
from .store import MemoryStore
from .syncrepo import (
    Where,
    environment,
    identity,
    in_flight,
    need,
    note,
    repair,
    state_of,
)


@dataclass
class Report:
    """What one sync did."""

    committed: str | None = None  # the first line of the local commit
    merged: list[str] = field(default_factory=list)  # memories the merge changed here
    conflicts: list[str] = field(default_factory=list)  # now marked conflicted
    kept: list[str] = field(default_factory=list)  # edited on one side, retired on the other
    pushed: bool = False
    remote: str = ""
    offline: str | None = None  # why the remote could not be reached

    def lines(self) -> list[str]:
        out = []
        if self.committed:
            out.append(f"Committed: {self.committed}")
        if self.merged:
            out.append(f"Merged from {self.remote}: {', '.join(self.merged)}")
        for name in self.conflicts:
            out.append(
                f"Conflict: {name} was changed on both sides — the other version is in"
                f" history; 'memdir resolve {name}' when you have looked"
            )
        for name in self.kept:
            out.append(f"Kept {name}: edited on one side, retired on the other (the edit wins)")
        if self.offline:
            out.append(f"Not synced: {self.offline}")
        elif self.pushed:
            out.append(f"Pushed to {self.remote}.")
        if not out:
            out.append("Already in sync.")
        return out


def _preflight(where: Where, root: Path) -> str:
    """The branch to sync; SyncError when the repository is not in a state to sync."""
    what = in_flight(where)
    if what is not None:
        mine = state_of(root).read().get("merging")
        merge_head = where.git.run("rev-parse", "-q", "--verify", "MERGE_HEAD", check=False)
        if not (what == "a merge" and (where.owned or mine == merge_head.out.strip())):
            raise SyncError(
                f"the repository at {where.top} is in the middle of {what} — finish or abort"
                " it first, then sync"
            )
    branch = where.git.run("symbolic-ref", "-q", "--short", "HEAD", check=False).out.strip()
    if not branch:
        raise SyncError(f"the repository at {where.top} is on a detached HEAD — check out a branch")
    if not where.owned and what is None:
        staged = where.git.run("diff", "--cached", "--name-only", "-z", check=False).out
        outside = [p for p in staged.split("\0") if p and not p.startswith(where.rel + "/")]
        if outside:
            raise SyncError(
                f"{outside[0]} is staged in {where.top} — commit or unstage your own changes"
                " before syncing (memdir commits only the memory folder)"
            )
    return branch


def _upstream(where: Where, branch: str, remote: str | None) -> tuple[str, str]:
    """The remote and the branch on it that ``branch`` syncs with."""
    git = where.git
    if remote is None:
        remote = git.run("config", f"branch.{branch}.remote", check=False).out.strip() or None
    if remote is None:
        remotes = git.out("remote").split()
        if not remotes:
            raise SyncError(
                f"the repository at {where.top} has no remote — run 'memdir sync --init URL'"
                " (or 'git remote add origin URL')"
            )
        remote = "origin" if "origin" in remotes else remotes[0]
    merge_ref = git.run("config", f"branch.{branch}.merge", check=False).out.strip()
    theirs = merge_ref.removeprefix("refs/heads/") if merge_ref else branch
    return remote, theirs


def _is_memory(fname: str) -> bool:
    return fname.endswith(".md") and "/" not in fname and fname != INDEX_FILE


def _store_paths(where: Where, listing: str) -> list[str]:
    """The store's file names among NUL-separated repository paths."""
    prefix = "" if where.owned else where.rel + "/"
    return [p[len(prefix) :] for p in listing.split("\0") if p and p.startswith(prefix)]


def _screen(root: Path, fname: str) -> None:
    """SyncError naming the file when a file about to be committed holds a credential."""
    try:
        text = (root / fname).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    try:
        mem = memfmt.loads(text)
    except MemdirError:
        from . import secrets

        if secrets.scan(text):
            raise SyncError(
                f"refusing to commit {fname}: it holds what looks like a credential — remove it"
            ) from None
        return
    try:
        screen([Put(mem)], "refuse")
    except SecretFound as exc:
        raise SyncError(
            f"refusing to commit {fname}: {exc} — edit the file, or run"
            f" 'memdir rm --purge {mem.name}' (it stays out of git until then)"
        ) from None


def _message(store: MemoryStore, status: list[tuple[str, str]], since: str) -> str:
    """The commit message: what was added, updated and retired, and by whom (the sources of
    the logged operations after ``since``, the last one a commit covered)."""
    groups: dict[str, list[str]] = {"added": [], "updated": [], "retired": []}
    for code, fname in status:
        if not _is_memory(fname):
            continue
        key = {"A": "added", "D": "retired"}.get(code[0], "updated")
        groups[key].append(fname[:-3])
    ops = store.log(limit=1000)
    ids = [op.id for op in ops]
    by: dict[str, set[str]] = {}
    for op in ops[ids.index(since) + 1 if since in ids else 0 :]:
        for ch in op.changes:
            by.setdefault(ch["name"], set()).add(op.source)
    counts = [f"{len(v)} {k}" for k, v in groups.items() if v]
    lines = ["memdir: " + (", ".join(counts) if counts else "store settings"), ""]
    for key, names in groups.items():
        if names:
            lines.append(f"{key}: {_some(sorted(names))}")
    sources: dict[str, list[str]] = {}
    for names in groups.values():
        for name in sorted(names):
            for src in sorted(by.get(name, {"hand edit"})):
                sources.setdefault(src, []).append(name)
    if sources:
        lines.append("by: " + "; ".join(f"{s} ({_some(n)})" for s, n in sorted(sources.items())))
    lines.append(f"on: {socket.gethostname() or 'localhost'}")
    return "\n".join(lines) + "\n"


def _some(names: list[str], most: int = 20) -> str:
    """Names for a commit message: all of a few, the first ``most`` of many."""
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _commit_local(where: Where, store: MemoryStore) -> str | None:
    """Commit the store's changes (only its folder); the commit's first line, or None."""
    git = where.git
    git.run("add", "-A", "--", where.rel)
    listing = git.run("diff", "--cached", "--name-status", "-z", "--no-renames", "--", where.rel)
    parts = listing.out.split("\0")
    status: list[tuple[str, str]] = []
    for i in range(0, len(parts) - 1, 2):
        status += [(parts[i], f) for f in _store_paths(where, parts[i + 1])]
    if not status:
        return None
    for code, fname in status:
        if code[0] != "D" and fname.endswith(".md") and fname != INDEX_FILE:
            try:
                _screen(store.root, fname)
            except SyncError:
                git.run("reset", "-q", "--", where.path(fname), check=False)
                raise
    since = str(state_of(store.root).read().get("logged", ""))
    message = _message(store, status, since)
    git.run("commit", "-q", "-F", "-", "--", where.rel, input=message.encode())
    last = store.log(limit=1)
    if last:
        state_of(store.root).update(lambda s: s.__setitem__("logged", last[-1].id))
    return message.splitlines()[0]


def _fetch(where: Where, remote: str, branch: str) -> str | None:
    """Fetch ``branch`` from ``remote``; its commit, or None when the remote has no such
    branch yet (a first push)."""
    git = where.git
    git.run("fetch", "-q", remote, remote=remote)
    res = git.run(
        "rev-parse", "-q", "--verify", f"refs/remotes/{remote}/{branch}^{{commit}}", check=False
    )
    return res.out.strip() or None


def _snapshot(where: Where, store: MemoryStore, target: str) -> dict[str, bytes | None]:
    """The store's files a merge with ``target`` may change, as they are now."""
    listing = where.git.run(
        "diff", "--name-only", "-z", "--no-renames", "HEAD", target, "--", where.rel
    ).out
    before: dict[str, bytes | None] = {}
    for fname in _store_paths(where, listing):
        if _is_memory(fname):
            try:
                before[fname] = (store.root / fname).read_bytes()
            except FileNotFoundError:
                before[fname] = None
    return before


def _unmerged(where: Where) -> dict[str, dict[int, str]]:
    """Paths git could not merge, with the blob of each stage (1 base, 2 ours, 3 theirs)."""
    out: dict[str, dict[int, str]] = {}
    for line in where.git.run("ls-files", "-u", "-z").out.split("\0"):
        if not line:
            continue
        info, path = line.split("\t", 1)
        _, blob, stage = info.split()
        out.setdefault(path, {})[int(stage)] = blob
    return out


def _settle(where: Where, root: Path, report: Report, target: str) -> None:
    """Resolve what git left unmerged in the store (memory files field by field, MEMORY.md
    from either side, edit wins over delete); anything else aborts the merge."""
    git = where.git
    paths = _unmerged(where)
    prefix = "" if where.owned else where.rel + "/"
    people = [
        p
        for p in paths
        if not p.startswith(prefix) or "/" in p[len(prefix) :] or not p.endswith(".md")
    ]
    if people:
        git.run("merge", "--abort", check=False)
        state_of(root).update(lambda s: s.pop("merging", None))
        raise SyncError(
            f"{people[0]} was changed on both sides and is not a memory — merge it yourself"
            f" (git merge {target[:12]} in {where.top}); your memory changes are committed"
        )
    for path, stages in paths.items():
        fname = path[len(prefix) :]
        full = root / fname
        text = {k: (git.blob(v) or b"").decode("utf-8", "replace") for k, v in stages.items()}
        if fname == INDEX_FILE:  # rendered again from the merged files
            full.write_text(text.get(2) or text.get(3) or "", encoding="utf-8")
        elif 2 in stages and 3 in stages:
            ids = {text[2]: stages[2], text[3]: stages[3]}  # the loser's blob names it
            merged = merge(text.get(1), text[2], text[3], ref=ids.__getitem__)
            full.write_text(merged.text, encoding="utf-8")
        elif 2 in stages or 3 in stages:  # edited on one side, deleted on the other
            full.write_text(text.get(2) or text.get(3, ""), encoding="utf-8")
            report.kept.append(fname[:-3])
        else:
            git.run("rm", "-q", "--cached", "--", path, check=False)
            continue
        git.run("add", "--", path)


def _begin(where: Where, target: str, label: str) -> None:
    """Start merging ``target``: a fast-forward when the branch has nothing of its own, else a
    merge left uncommitted for ``_settle`` and the index to be rendered."""
    git = where.git
    if git.run("merge-base", "--is-ancestor", "HEAD", target, check=False).code == 0:
        git.run("merge", "-q", "--ff-only", target)
        return
    args = ["merge", "-q", "--no-ff", "--no-commit", "-m", f"memdir: merge {label}"]
    if where.owned and git.run("merge-base", "HEAD", target, check=False).code != 0:
        args.append("--allow-unrelated-histories")  # a second machine's first sync
    res = git.run(*args, target, check=False)
    if res.code != 0 and in_flight(where) != "a merge":
        err = (res.err or res.out).strip().splitlines()
        raise SyncError(
            "git could not merge: "
            + (err[0] if err else "unknown error")
            + " — commit or stash your own changes to those files, then sync"
        )


def _marked(
    where: Where, root: Path, before: dict[str, bytes | None], report: Report
) -> dict[str, bytes]:
    """The memories the merge newly marked conflicted, with the other side's text."""
    others: dict[str, bytes] = {}
    for fname, old in before.items():
        try:
            mem = memfmt.loads((root / fname).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, MemdirError):
            continue
        mark = conflict_of(mem)
        old_mark = None
        if old is not None:
            with contextlib.suppress(MemdirError, UnicodeDecodeError):
                old_mark = conflict_of(memfmt.loads(old.decode("utf-8")))
        if mark and mark != old_mark:
            report.conflicts.append(mem.name)
            data = where.git.blob(str(mark.get("other", "")))
            if data is not None:
                others[mem.name] = data
    return others


def _merge(where: Where, store: MemoryStore, target: str, report: Report, label: str = "") -> None:
    """Merge ``target`` into the branch, memories field by field; record it in history."""
    git = where.git
    root = store.root
    merging = in_flight(where) == "a merge"  # one a killed sync started
    if (
        not merging
        and git.run("merge-base", "--is-ancestor", target, "HEAD", check=False).code == 0
    ):
        return  # nothing new
    before = _snapshot(where, store, "MERGE_HEAD" if merging else target)
    if merging:  # its files may be half-way: what HEAD holds is what was here
        before = {fname: git.blob(f"HEAD:{where.path(fname)}") for fname in before}
    else:
        state_of(root).update(lambda s: s.__setitem__("merging", target))
        _begin(where, target, label or target[:12])
    _settle(where, root, report, target)
    others = _marked(where, root, before, report)
    notes = [f"kept {n}: edited on one side, retired on the other" for n in report.kept]
    notes += [f"conflict in {n}: the other version is in history" for n in report.conflicts]
    op = store.adopt(
        before,
        source="sync",
        summary="; ".join([f"sync: merged {label or target[:12]}", *notes]),
        reason="merged by sync",
        others=others,
    )
    if op is not None:
        report.merged = sorted({ch["name"] for ch in op.changes})
    elif notes:  # nothing changed here, but what happened is still said in the log
        store.record("; ".join([f"sync: merged {label or target[:12]}", *notes]), source="sync")
    git.run("add", "-A", "--", where.rel)
    if in_flight(where) == "a merge":
        message = "\n".join([f"memdir: merge {label or target[:12]}", "", *notes]) + "\n"
        git.run("commit", "-q", "--no-verify", "-F", "-", input=message.encode())
    elif git.run("diff", "--cached", "--quiet", "--", where.rel, check=False).code != 0:
        message = "memdir: MEMORY.md rendered from the merged files"
        git.run("commit", "-q", "-F", "-", "--", where.rel, input=message.encode())
    state_of(root).update(lambda s: s.pop("merging", None))


def _push(where: Where, remote: str, branch: str, theirs: str) -> None:
    git = where.git
    if not where.owned:
        ahead = git.run(
            "diff", "--name-only", "-z", f"refs/remotes/{remote}/{theirs}", "HEAD", check=False
        )
        if ahead.code != 0:  # the remote lacks the branch: pushing would publish all of it
            raise SyncError(
                f"not pushed: {remote} has no branch {theirs} yet — push your branch once yourself"
                f" ('git push -u {remote} {branch}'); the memory changes are committed here"
            )
        outside = [p for p in ahead.out.split("\0") if p and not p.startswith(where.rel + "/")]
        if outside:
            raise SyncError(
                f"not pushed: {branch} also holds your own unpushed commits ({outside[0]}…)"
                " — push them yourself with 'git push' when they are ready"
            )
    args = ["push", "-q", remote, f"HEAD:refs/heads/{theirs}"]
    if not git.run("config", f"branch.{branch}.remote", check=False).out.strip():
        args.insert(2, "--set-upstream")
    git.run(*args, remote=remote)


@contextlib.contextmanager
def _sync_lock(root: Path, wait: bool) -> Iterator[bool]:
    import filelock

    lock = filelock.FileLock(str(root / INTERNAL / SYNC_LOCK))
    try:
        lock.acquire(timeout=600 if wait else 0)
    except filelock.Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def sync(
    store: MemoryStore, *, remote: str | None = None, push: bool = True, wait: bool = True
) -> Report:
    """Commit the store's changes, fetch, merge and push; a failure that loses nothing (the
    remote unreachable, the push rejected twice) is in the report and the state file (for
    ``doctor``), other failures raise SyncError."""
    root = store.root
    where = need(root)
    report = Report()
    with _sync_lock(root, wait) as held:
        if not held:
            state_of(root).update(lambda s: s.__setitem__("again", True))
            report.offline = "another sync of this store is at work; it will include these changes"
            return report
        with environment(identity(where.git)):
            try:
                _sync(where, store, remote, push, report)
            except (Offline, PushRejected) as exc:
                report.offline = str(exc)
            except SyncError as exc:
                note(root, str(exc))
                raise
        note(root, report.offline)
    return report


def _sync(where: Where, store: MemoryStore, remote: str | None, push: bool, report: Report) -> None:
    repair(where, store.root)
    branch = _preflight(where, store.root)
    if in_flight(where) == "a merge":  # finish what a killed sync began
        with store.locked():
            _merge(where, store, where.git.out("rev-parse", "MERGE_HEAD"), report)
    with store.locked():
        state_of(store.root).update(lambda s: s.pop("again", None))
        report.committed = _commit_local(where, store)
    name, theirs = _upstream(where, branch, remote)
    report.remote = f"{name}/{theirs}"
    for attempt in range(3):
        target = _fetch(where, name, theirs)
        if target is not None:
            with store.locked():
                _merge(where, store, target, report, report.remote)
        if not push or (target is not None and where.git.out("rev-parse", "HEAD") == target):
            return  # nothing of ours that the remote lacks
        try:
            _push(where, name, branch, theirs)
        except PushRejected:
            if attempt == 2:
                raise
            continue
        report.pushed = True
        return


def background(store: MemoryStore, config: Config) -> Report | None:
    """The body of ``memdir sync --background``: wait the debounce, then sync; a sync already
    at work is asked to go again instead. Failures are kept for ``doctor``, never raised."""
    time.sleep(config.sync_debounce)
    report = None
    for _ in range(5):
        try:
            report = sync(store, wait=False)
        except MemdirError:
            return None
        if report.offline and "another sync" in report.offline:
            return report
        if not state_of(store.root).read().get("again"):
            break
    return report
