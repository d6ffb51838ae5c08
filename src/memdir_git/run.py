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
import dataclasses
import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from memdir import memory as memfmt
from memdir.config import Config
from memdir.disk.atomic import write_atomic
from memdir.disk.layout import SYNC_LOCK, state_dir
from memdir.entry import INDEX_FILE
from memdir.errors import MemdirError
from memdir.gate.trust import ACCEPTED_COPY, PULLED_CONFIG
from memdir.store import MemoryStore
from memdir_git import guard
from memdir_git.commit import commit_local, hold_arrivals
from memdir_git.git import Git, Offline, PushRejected, SyncError
from memdir_git.merge import conflict_of, merge
from memdir_git.repo import (
    Where,
    identity,
    in_flight,
    need,
    note,
    read_nofollow,
    repair,
    state_of,
)
from memdir_git.report import Report


def _preflight(where: Where, root: Path) -> str:
    """The branch to sync; SyncError when the repository is not in a state to sync."""
    what = in_flight(where)
    if what is not None:
        mine = state_of(root).read().get("merging")
        merge_head = where.git.run("rev-parse", "-q", "--verify", "MERGE_HEAD", check=False)
        if not (what == "a merge" and (where.owned or mine == merge_head.out.strip())):
            unmerged = where.git.run(
                "ls-files", "--unmerged", "--", where.path("*.md"), f":!{where.path(INDEX_FILE)}",
                check=False,
            )  # fmt: skip
            memories = (
                " (a memory git left conflicted: 'memdir resolve NAME --keep current|other')"
                if unmerged.out.strip()
                else ""
            )
            raise SyncError(
                f"the repository at {where.top} is in the middle of {what} — finish{memories}"
                " or abort it first, then sync"
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


def _store_paths(where: Where, listing: str) -> list[str]:
    """The store's file names among NUL-separated repository paths."""
    prefix = "" if where.owned else where.rel + "/"
    return [p[len(prefix) :] for p in listing.split("\0") if p and p.startswith(prefix)]


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
        if guard.is_memory(fname):
            before[fname] = read_nofollow(store.root / fname)
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
            write_atomic(full, (text.get(2) or text.get(3) or "").encode())
        elif 2 in stages and 3 in stages:
            ids = {text[2]: stages[2], text[3]: stages[3]}  # the loser's blob names it
            merged = merge(text.get(1), text[2], text[3], ref=ids.__getitem__)
            write_atomic(full, merged.text.encode())
        elif 2 in stages or 3 in stages:  # edited on one side, deleted on the other
            write_atomic(full, (text.get(2) or text.get(3, "")).encode())
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
            mem = memfmt.loads((read_nofollow(root / fname) or b"").decode("utf-8"))
        except (UnicodeDecodeError, MemdirError):
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
    base = git.run("merge-base", "HEAD", target, check=False).out.strip() or None
    by = guard.authors(git, where.rel, base, target)
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
        authors={f: by[f] for f in before if f in by},
    )
    if op is not None:
        held = hold_arrivals(store, op, before, label or "the remote", target)
        report.held = [f"{h.name} ({h.why})" for h in held]
        report.merged = sorted({ch["name"] for ch in op.changes})
        for ch in op.changes:
            kind = {"create": report.added, "delete": report.retired}.get(ch["action"])
            (report.updated if kind is None else kind).append(ch["name"])
    elif notes:  # nothing changed here, but what happened is still said in the log
        store.record("; ".join([f"sync: merged {label or target[:12]}", *notes]), source="sync")
    guard.stage(git, where.rel, root)
    if in_flight(where) == "a merge":
        message = "\n".join([f"memdir: merge {label or target[:12]}", "", *notes]) + "\n"
        git.run("commit", "-q", "--no-verify", "-F", "-", input=message.encode())
    elif git.run("diff", "--cached", "--quiet", "--", where.rel, check=False).code != 0:
        message = "memdir: MEMORY.md rendered from the merged files"
        git.run("commit", "-q", "-F", "-", input=message.encode())
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


WAIT_FOR_SYNC = 600  # seconds a sync waits for another one of the same store to end


@contextlib.contextmanager
def _sync_lock(root: Path, wait: bool, waiting: Callable[[], None] | None = None) -> Iterator[bool]:
    """The store's one sync at work (``waiting`` is told when another one holds it first)."""
    import filelock

    lock = filelock.FileLock(str(state_dir(root) / SYNC_LOCK))
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        if waiting is not None and wait:
            waiting()
        try:
            lock.acquire(timeout=WAIT_FOR_SYNC if wait else 0)
        except filelock.Timeout:
            yield False
            return
    try:
        yield True
    finally:
        lock.release()


@dataclass(frozen=True)
class Let:
    """What a person let through past sync's checks of the remote, for one sync."""

    skip: tuple[str, ...] = ()  # commits whose refused files are left out of the merge
    retire: bool = False  # take a remote that retires more memories than the bound


def sync(
    store: MemoryStore,
    *,
    remote: str | None = None,
    push: bool = True,
    wait: bool = True,
    let: Let | None = None,
    waiting: Callable[[], None] | None = None,
) -> Report:
    """Commit the store's changes, fetch, check what the remote sent, merge and push; a
    failure that loses nothing (the remote unreachable, the push rejected twice) is in the
    report and the state file (for ``doctor``), other failures (a refused remote among them)
    raise SyncError."""
    root = store.root
    found = need(root)
    where = dataclasses.replace(found, git=Git(found.top, identity(found.git)))
    report = Report()
    with _sync_lock(root, wait, waiting) as held:
        if not held:
            state_of(root).update(lambda s: s.__setitem__("again", True))
            report.offline = "another sync of this store is at work; it will include these changes"
            return report
        try:
            _sync(where, store, remote, push, report, let or Let())
        except (Offline, PushRejected) as exc:
            report.offline = str(exc)
        except SyncError as exc:
            note(root, str(exc))
            raise
        note(root, report.offline)
    return report


def _vet(where: Where, store: MemoryStore, target: str, report: Report, let: Let) -> str:
    """``target`` once checked (SyncError when the remote sent what sync refuses), or a commit
    on top of it without what ``let.skip`` leaves out."""
    git = where.git
    seen = guard.check(git, where.rel, target, max_bytes=store.config.max_file_bytes)
    refused = [r for r in seen.refusals if not any(r.commit.startswith(c) for c in let.skip if c)]
    if refused:
        raise guard.refusal_error(report.remote, refused[0])
    limit = seen.retire_limit(store.config.consolidate_max_retire_share)
    if len(seen.retired) > limit and not let.retire:
        raise SyncError(
            f"refused what {report.remote} sent: it retires {len(seen.retired)} of {seen.total}"
            f" memories ({', '.join(n[:-3] for n in seen.retired[:3])}…), more than the {limit}"
            f" a sync takes without asking — look at 'git log {report.remote}', then run"
            " 'memdir sync --allow-retire' to take it; nothing was merged"
        )
    report.changed = list(seen.changed)
    if not seen.refusals:
        return target
    report.left_out = sorted({r.path or where.rel for r in seen.refusals})
    why = ", ".join(sorted({r.commit[:12] for r in seen.refusals}))
    return guard.leave_out(git, target, where.rel, [r.path for r in seen.refusals], why)


def _default_branch(where: Where, remote: str, branch: str) -> str:
    """After the first push to ``remote``: make ``branch`` what its clones check out (a
    repository on this machine), or say how."""
    url = where.git.run("remote", "get-url", remote, check=False).out.strip()
    local = Path(url.removeprefix("file://")).expanduser()
    if local.is_dir() and (local / "HEAD").is_file():  # a bare repository on a disk
        head = Git(local).run("symbolic-ref", "HEAD", check=False).out.strip()
        if head != f"refs/heads/{branch}":
            Git(local).run("symbolic-ref", "HEAD", f"refs/heads/{branch}", check=False)
            return f"{remote} had no branch yet: its clones now check out {branch}."
        return f"{remote} had no branch yet: {branch} is now its first."
    return (
        f"{remote} had no branch yet: if a clone of it checks out nothing, make {branch} its"
        " default branch (in the hosting service's settings)"
    )


def _config_pulled(root: Path, before: bytes | None) -> None:
    """Mark a config.toml the merge changed as the remote's: ignored until the person accepts
    it (``memdir trust``), or edits it themselves."""
    now = read_nofollow(root / "config.toml")
    if now is None or now == before:
        return
    copy = state_dir(root) / ACCEPTED_COPY
    waiting = state_of(root).read().get(PULLED_CONFIG)
    if before is None:
        copy.unlink(missing_ok=True)  # there were no settings to keep in force
    elif hashlib.sha256(before).hexdigest() != waiting:  # ``before`` was in force here
        write_atomic(copy, before)  # and stays in force until the person accepts the new one
    mark = hashlib.sha256(now).hexdigest()
    state_of(root).update(lambda s: s.__setitem__(PULLED_CONFIG, mark))


def _sync(
    where: Where, store: MemoryStore, remote: str | None, push: bool, report: Report, let: Let
) -> None:
    repair(where, store.root)
    guard.force_attributes(where.git, where.rel)
    branch = _preflight(where, store.root)
    if in_flight(where) == "a merge":  # finish what a killed sync began
        with store.locked():
            _merge(where, store, where.git.out("rev-parse", "MERGE_HEAD"), report)
    with store.locked():
        state_of(store.root).update(lambda s: s.pop("again", None))
        report.committed = commit_local(where, store)
    name, theirs = _upstream(where, branch, remote)
    report.remote = f"{name}/{theirs}"
    for attempt in range(3):
        target = merged = _fetch(where, name, theirs)
        if target is not None:
            new = where.git.run("merge-base", "--is-ancestor", target, "HEAD", check=False)
            with store.locked():
                if new.code != 0:
                    merged = _vet(where, store, target, report, let)
                config_before = read_nofollow(store.root / "config.toml")
                _merge(where, store, merged or target, report, report.remote)
                _config_pulled(store.root, config_before)
        if not push or (target is not None and where.git.out("rev-parse", "HEAD") == target):
            return  # nothing of ours that the remote lacks
        try:
            _push(where, name, branch, theirs)
        except PushRejected:
            if attempt == 2:
                raise
            continue
        report.pushed = True
        if target is None:  # the remote had no such branch: clones should check it out
            report.notes.append(_default_branch(where, name, theirs))
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
