"""``memdir sync`` with real git: a bare remote in a temporary folder and clones standing for
machines or teammates."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from machines import Machine, files, git
from memdir import memory as memfmt
from memdir_git.git import Offline, PushRejected, SyncError

from conftest import child_env


def assert_consistent(*ms: Machine) -> None:
    """Same memories everywhere, MEMORY.md rendered from them, no conflict markers."""
    first = files(ms[0].user)
    for m in ms:
        assert files(m.user) == first
        for text in first.values():
            assert "<<<<<<<" not in text and ">>>>>>>" not in text
        store = m.store()
        assert store.index_path.read_text().count("\n- [") == len(store.entries())
        assert store.problems() == [] or all(p.severity != "error" for p in store.problems())
        assert git(m.user, "status", "--porcelain") == ""


def test_both_add_and_both_end_with_the_union(machines: list[Machine], remote: Path) -> None:
    """Two machines that both add memories both end with the union."""
    a, b = machines
    a.add("tabs", "Tabs for indentation")
    b.add("pytest", "Run tests with pytest -q")
    b.ok("sync", "--scope", "user")
    out = a.ok("sync", "--scope", "user")
    assert "Merged from origin/main: pytest" in out
    b.ok("sync", "--scope", "user")
    assert_consistent(a, b)
    assert {"tabs.md", "pytest.md", "hello-laptop.md", "hello-devbox.md"} <= set(files(a.user))
    message = git(a.user, "log", "--format=%B", "-n", "20")
    assert "added: tabs" in message and "by: cli (tabs)" in message
    for machine in (a, b):  # what a sync merged is the sync's, never a change "by hand"
        assert "hand" not in {op.source for op in machine.store().log()}


def test_a_rule_from_the_other_machine_says_it_waits_here(machines: list[Machine]) -> None:
    """A preference given on the laptop reaches the dev box recalled but not standing: the
    sync says so and names it, and once accepted there it stands."""
    from memdir.standing import standing

    a, b = machines
    a.ok("add", "pnpm", "--type", "user_preference", "-d", "Use pnpm", "--body", "Use pnpm.")
    a.ok("sync", "--scope", "user")
    out = b.ok("sync", "--scope", "user")
    assert "Rules that arrived and stand at session start here once you accept them:" in out
    assert "pnpm" in out.split("accept them:")[1] and "'memdir accept NAME' (or --all)" in out
    assert "Use pnpm." not in standing(b.store(), 2000, 200, 25_000).text
    b.ok("accept", "pnpm")
    assert "Use pnpm." in standing(b.store(), 2000, 200, 25_000).text
    assert "accept them" not in b.ok("sync", "--scope", "user")


def test_same_memory_changed_on_both_sides(machines: list[Machine]) -> None:
    """The same memory changed on two machines is a conflict that keeps both texts and leaves both
    machines consistent."""
    a, b = machines
    a.add("tabs", "Tabs, width 4")
    a.ok("sync", "--scope", "user")
    b.ok("sync", "--scope", "user")
    a.add("tabs", "Tabs, width 2")
    b.add("tabs", "Tabs, width 8", description="Tabs, eight wide")
    a.ok("sync", "--scope", "user")
    out = b.ok("sync", "--scope", "user")
    assert "Conflict: tabs" in out
    a.ok("sync", "--scope", "user")
    assert_consistent(a, b)
    mem = memfmt.loads((a.user / "tabs.md").read_text())
    # the description goes with its body: one side's text, whole
    assert (mem.description, mem.body) in {
        ("About tabs", "Tabs, width 2"),
        ("Tabs, eight wide", "Tabs, width 8"),
    }
    assert "conflict" in mem.extra
    for m in (a, b):  # the other version is kept in each clone's history
        texts = [m.store().version_text("tabs", v.version) for v in m.store().history("tabs")]
        bodies = {memfmt.loads(t).body for t in texts}
        assert {"Tabs, width 2", "Tabs, width 8"} - {mem.body} <= bodies
        assert "conflicted" in m.ok("list", "--scope", "user")
        assert "conflicted: two syncs changed it differently" in m("doctor", "--scope", "user").out
    recalled = a.ok("recall", "--no-llm", "tabs width")
    assert 'name="tabs"' in recalled and 'conflicted="true' in recalled
    listed = json.loads(a.ok("list", "--scope", "user", "--json"))
    assert [e["conflicted"] for e in listed if e["name"] == "tabs"] == [True]
    other = ({"Tabs, width 2", "Tabs, width 8"} - {mem.body}).pop()
    assert "Resolved tabs: kept the other version" in b.ok(
        "resolve", "tabs", "--scope", "user", "--keep", "theirs"
    )
    resolved = memfmt.loads((b.user / "tabs.md").read_text())
    assert resolved.body == other and "conflict" not in resolved.extra
    b.ok("sync", "--scope", "user")
    a.ok("sync", "--scope", "user")
    assert_consistent(a, b)
    assert "conflicted" not in a.ok("list", "--scope", "user")
    assert "has no conflict" in a("resolve", "tabs", "--scope", "user").err
    bad = a("resolve", "tabs", "--scope", "user", "--keep", "bogus")
    assert "has no conflict" in bad.err  # checked first; the words below are the help's
    assert "current (the text here now; git's HEAD side), other" in a("resolve", "--help").out


def test_edit_on_one_side_delete_on_the_other_keeps_the_edit(machines: list[Machine]) -> None:
    """An edit on one side and a delete on the other keep the edit."""
    a, b = machines
    a.add("tabs", "Tabs, width 4")
    a.ok("sync", "--scope", "user")
    b.ok("sync", "--scope", "user")
    a.add("tabs", "Tabs, width 2")
    b.ok("rm", "--scope", "user", "tabs")
    b.ok("sync", "--scope", "user")
    out = a.ok("sync", "--scope", "user")
    b.ok("sync", "--scope", "user")
    assert_consistent(a, b)
    assert memfmt.loads((b.user / "tabs.md").read_text()).body == "Tabs, width 2"
    assert "Kept tabs: edited on one side, retired on the other" in out
    assert "kept tabs: edited on one side, retired on the other" in git(
        a.user, "log", "--format=%B", "-n", "10"
    )
    assert "kept tabs" in a.ok("log", "--scope", "user")


def test_rename_on_one_side_edit_on_the_other_follows_the_rename(machines: list[Machine]) -> None:
    """A rename on one side and an edit on the other follow the rename."""
    a, b = machines
    a.add("tabs", "Use tabs for indentation in every Python and Go file of this project.")
    a.ok("sync", "--scope", "user")
    b.ok("sync", "--scope", "user")
    a.ok("mv", "user:tabs", "indentation")
    b.add("tabs", "Use tabs for indentation in every Python, Go and C file of this project.")
    a.ok("sync", "--scope", "user")
    b.ok("sync", "--scope", "user")
    a.ok("sync", "--scope", "user")
    assert_consistent(a, b)
    assert not (a.user / "tabs.md").exists()
    mem = memfmt.loads((a.user / "indentation.md").read_text())
    assert mem.name == "indentation" and "C file" in mem.body


def test_a_hand_edit_is_synced_and_said_to_be_one(machines: list[Machine]) -> None:
    """A hand edit is synced and said to be one."""
    a, b = machines
    path = a.user / "hello-laptop.md"
    path.write_text(path.read_text().replace("set up on laptop", "edited in vim"))
    a.ok("sync", "--scope", "user")
    assert "by: hand edit (hello-laptop)" in git(a.user, "log", "-1", "--format=%B")
    b.ok("sync", "--scope", "user")
    assert "edited in vim" in (b.user / "hello-laptop.md").read_text()
    # the merge is in memdir's own history and log: undo takes it back
    assert b.store().log(limit=1)[0].source == "sync"
    assert "hand" not in {op.source for op in b.store().log()}  # (the merge is sync's)
    assert [op.source for op in a.store().log()].count("hand") == 1  # (a's edit, once)
    b.ok("undo", "--scope", "user")
    assert "set up on laptop" in (b.user / "hello-laptop.md").read_text()


def test_a_credential_in_a_file_is_never_committed(machines: list[Machine]) -> None:
    """A credential in a file is never committed."""
    a, _ = machines
    before = git(a.user, "rev-parse", "HEAD")
    path = a.user / "hello-laptop.md"
    path.write_text(path.read_text() + "\nkey: sk-ant-api03-" + "x7Kq9" * 12 + "\n")
    res = a("sync", "--scope", "user")
    assert res.code == 1
    assert "refusing to commit hello-laptop.md" in res.err and "rm --purge" in res.err
    assert git(a.user, "rev-parse", "HEAD") == before
    assert "sk-ant" not in git(a.user, "log", "-p", "--all")


def test_push_rejected_because_the_remote_moved_is_merged_and_pushed(
    machines: list[Machine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, remote: Path
) -> None:
    """Push rejected because the remote moved is merged and pushed."""
    a, b = machines
    third = Machine(tmp_path, "third", monkeypatch)
    git(tmp_path, "clone", "-q", str(remote), str(third.user))
    third.add("from-third", "pushed while laptop was pushing")
    # laptop's pre-push hook makes the third clone push first, once: the remote moves
    hook = a.user / ".git" / "hooks" / "pre-push"
    hook.write_text(
        "#!/bin/sh\n"
        f"if [ ! -e {tmp_path}/moved ]; then touch {tmp_path}/moved;"
        f" cd {third.user} && git add -A . && git -c user.email=t@t -c user.name=t commit -qm x"
        " && git push -q origin HEAD:main; fi\n"
    )
    hook.chmod(0o755)
    a.add("tabs", "Tabs")
    out = a.ok("sync", "--scope", "user")
    assert (tmp_path / "moved").exists() and "Pushed to origin/main" in out
    b.ok("sync", "--scope", "user")
    assert_consistent(a, b)
    assert (b.user / "from-third.md").exists() and (b.user / "tabs.md").exists()


def test_offline_is_reported_nothing_lost_and_the_next_sync_pushes(
    machines: list[Machine], remote: Path
) -> None:
    """Offline is reported, nothing is lost, and the next sync pushes."""
    a, b = machines
    git(a.user, "remote", "set-url", "origin", "http://127.0.0.1:9/nowhere.git")
    a.add("tabs", "Tabs")
    res = a("sync", "--scope", "user")
    assert res.code == 1 and "Not synced: cannot reach remote 'origin'" in res.out
    assert "Committed: memdir: 1 added" in res.out
    assert "the last sync failed" in a("doctor", "--scope", "user").out
    git(a.user, "remote", "set-url", "origin", str(remote))
    assert "Pushed" in a.ok("sync", "--scope", "user")
    assert "the last sync failed" not in a("doctor", "--scope", "user").out
    b.ok("sync", "--scope", "user")
    assert (b.user / "tabs.md").exists()


def test_plain_git_pull_uses_memdirs_merge(machines: list[Machine]) -> None:
    """Plain git pull uses memdir's merge."""
    a, b = machines
    a.add("tabs", "Tabs, width 4")
    a.ok("sync", "--scope", "user")
    b.ok("sync", "--scope", "user")
    a.add("tabs", "Tabs, width 2")
    a.add("spaces", "never spaces")
    a.ok("sync", "--scope", "user")
    b.add("tabs", "Tabs, width 8")
    git(b.user, "add", "-A", ".")
    git(b.user, "commit", "-qm", "by hand")
    git(b.user, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    text = (b.user / "tabs.md").read_text()
    assert "<<<<<<<" not in text and "conflict:" in text
    store = b.store()  # MEMORY.md, kept from one side by git, is rendered again on open
    assert "spaces" in store.index_path.read_text()


def test_errors_are_one_line_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Errors are one line with the fix."""
    m = Machine(tmp_path, "solo", monkeypatch)
    m.add("tabs", "Tabs")
    res = m("sync", "--scope", "user")
    assert res.code == 1
    assert res.err.strip().endswith("run 'memdir sync --init URL' to make it one")
    git(m.user, "init", "-q", "-b", "main")
    res = m("sync", "--scope", "user")
    assert res.code == 1 and "has no remote" in res.err and len(res.err.splitlines()) == 1
    res = m("sync", "--scope", "user", "--init", str(tmp_path / "missing.git"))
    assert res.code == 1 and "is not set up or is not a git repository" in res.err


def project(tmp_path: Path, remote: Path, name: str) -> Path:
    path = tmp_path / name
    git(tmp_path, "clone", "-q", str(remote), str(path))
    return path


def test_project_store_commits_only_the_memory_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, remote: Path
) -> None:
    """Syncing a project store commits only the memory folder."""
    m = Machine(tmp_path, "dev", monkeypatch)
    repo = project(tmp_path, remote, "app")
    (repo / "app.py").write_text("print('v1')\n")
    git(repo, "add", "app.py")
    git(repo, "commit", "-qm", "app")
    m.ok("init", "--git", cwd=repo)
    res = m("sync", cwd=repo)  # the branch is not on the remote: sync never publishes it
    assert res.code == 1 and "origin has no branch main yet" in res.err
    assert git(tmp_path, "--git-dir", str(remote), "branch", "--list") == ""
    git(repo, "push", "-q", "-u", "origin", "HEAD:main")
    m.ok(
        "add",
        "api-port",
        "--type",
        "project_fact",
        "-d",
        "The API port",
        "--body",
        "8080",
        cwd=repo,
    )
    (repo / "app.py").write_text("print('work in progress')\n")  # the person's own work
    (repo / "notes.txt").write_text("mine\n")
    git(repo, "add", "notes.txt")
    res = m("sync", cwd=repo)
    assert res.code == 1 and "notes.txt is staged" in res.err
    git(repo, "reset", "-q", "notes.txt")
    out = m.ok("sync", cwd=repo)
    assert "Pushed to origin/main" in out
    pushed = git(repo, "show", "--name-only", "--format=", "origin/main")
    assert pushed.split() and all(p.startswith(".memory/") for p in pushed.split())
    assert "work in progress" in (repo / "app.py").read_text()
    assert " M app.py" in git(repo, "status", "--porcelain")
    # a teammate's clone gets the memory and the merge drivers with 'memdir init --git'
    mate = project(tmp_path, remote, "mate")
    assert (mate / ".memory" / "api-port.md").exists()
    assert "merge=memdir" in (mate / ".memory" / ".gitattributes").read_text()
    res = m("doctor", cwd=mate)
    assert "git's merge driver 'memdir' is not registered" in res.out
    assert "registered git's merge driver 'memdir'" in m.ok("doctor", "--fix", cwd=mate)
    assert "not registered" not in m("doctor", cwd=mate).out
    assert "merge-file" in git(mate, "config", "merge.memdir.driver")


def test_project_mid_merge_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, remote: Path
) -> None:
    """A project repository in the middle of a merge is refused."""
    m = Machine(tmp_path, "dev", monkeypatch)
    repo = project(tmp_path, remote, "app")
    m.ok("init", "--git", cwd=repo)
    git(repo, "add", "-A", ".")
    git(repo, "commit", "-qm", "memory")
    (repo / ".git" / "MERGE_HEAD").write_text(git(repo, "rev-parse", "HEAD"))
    res = m("sync", cwd=repo)
    assert res.code == 1 and "in the middle of a merge" in res.err


def test_a_write_during_sync_is_kept_for_the_next(machines: list[Machine]) -> None:
    """A write during sync is kept for the next."""
    a, b = machines
    procs = [a.start("sync", "--scope", "user")]
    for i in range(5):
        a.add(f"learned-{i}", f"fact {i}")
    procs[0].wait()
    a.ok("sync", "--scope", "user")
    b.ok("sync", "--scope", "user")
    assert_consistent(a, b)
    assert {f"learned-{i}.md" for i in range(5)} <= set(files(b.user))


def test_a_sync_that_waits_for_another_says_so(machines: list[Machine]) -> None:
    """While another sync of the store is at work (a background one, stuck on the network),
    'memdir sync' says it waits for it instead of hanging without a word, then syncs."""
    from memdir.disk.layout import SYNC_LOCK, state_dir

    a, _ = machines
    a.add("tabs", "Indent with tabs.")
    lock = state_dir(a.user) / SYNC_LOCK
    holder = subprocess.Popen(  # another process's sync, for three seconds
        [sys.executable, "-c", "import filelock, sys, time;"
         " l = filelock.FileLock(sys.argv[1]); l.acquire(); print('held', flush=True);"
         " time.sleep(3)", str(lock)], stdout=subprocess.PIPE,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    r = a("sync", "--scope", "user")
    holder.wait(timeout=60)
    assert r.code == 0, r.err
    assert "Another sync of this store is at work: waiting for it to end" in r.err
    assert "another sync of this store is at work" not in r.out  # (it did sync itself)


def wait_for(check: Callable[[], bool], what: str) -> None:
    """Poll a background process's effect (a wait, not a speed check)."""
    for _ in range(600):
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


@pytest.mark.slow
def test_auto_sync_pulls_at_session_start_and_pushes_after_learning(
    machines: list[Machine],
) -> None:
    """Auto sync pulls at session start and pushes after learning."""
    a, b = machines
    for m in (a, b):
        (m.user / "config.toml").write_text('sync = "auto"\nsync_debounce = 0\nsync_interval = 0\n')
        m.ok("sync", "--scope", "user")
    b.add("from-devbox", "learned on the dev box")
    b.ok("sync", "--scope", "user")
    # the laptop's session start pulls, in the background
    event = {"source": "startup", "cwd": str(a.home), "hook_event_name": "SessionStart"}
    runner_env = dict(child_env(), MEMDIR_USER_DIR=str(a.user))
    proc = subprocess.run(
        [sys.executable, "-m", "memdir", "hook", "start"],
        input=json.dumps(event), text=True, capture_output=True, env=runner_env, cwd=a.home,
    )  # fmt: skip
    assert proc.returncode == 0
    wait_for(lambda: (a.user / "from-devbox.md").exists(), "the laptop pulled")
    # what the laptop learns is committed and pushed by itself
    from memdir.config import load_config
    from memdir_git import repo as syncrepo

    a.add("learned-here", "learned on the laptop")
    assert syncrepo.kick(a.user, load_config({"dir": a.home / ".memory"}, runner_env))
    wait_for(
        lambda: "learned-here.md" in git(a.user, "ls-tree", "--name-only", "origin/main"),
        "the laptop pushed",
    )


@pytest.mark.slow
def test_a_sync_killed_at_any_point_is_repaired_by_the_next(machines: list[Machine]) -> None:
    """A sync killed at any point is repaired by the next."""
    a, b = machines
    for i, delay in enumerate([0.2, 0.35, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.5]):
        a.add("shared", f"laptop says {i}")
        a.add(f"laptop-{i}", f"fact {i}")
        b.add("shared", f"devbox says {i}")
        b.add(f"devbox-{i}", f"fact {i}")
        b.ok("sync", "--scope", "user")
        proc = a.start("sync", "--scope", "user")
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)  # a git it started may still be at work
        proc.wait()
        store = a.store()  # opens consistent whatever the moment
        assert all(p.severity != "error" for p in store.problems())
        a.ok("sync", "--scope", "user")
        b.ok("sync", "--scope", "user")
        assert_consistent(a, b)
        names = set(files(a.user))
        assert {f"laptop-{i}.md", f"devbox-{i}.md"} <= names
        assert memfmt.loads((a.user / "shared.md").read_text()).body in (
            f"laptop says {i}",
            f"devbox says {i}",
        )


@pytest.mark.slow
def test_a_crash_that_takes_git_with_it_is_repaired_by_the_next_sync(
    machines: list[Machine],
) -> None:
    """A crash that takes git with it is repaired by the next sync."""
    a, b = machines
    for i, delay in enumerate([0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 1.1]):
        a.add("shared", f"laptop says {i}")
        b.add("shared", f"devbox says {i}")
        b.add(f"devbox-{i}", f"fact {i}")
        b.ok("sync", "--scope", "user")
        a.ok("sync", "--scope", "user", "--no-push")  # fetches nothing new: b pushes after
        b.add(f"devbox-late-{i}", "more")
        b.ok("sync", "--scope", "user")
        git(a.user, "fetch", "-q", "origin")
        # the merge only: the whole machine dies, git included
        proc = a.start("sync", "--scope", "user", "--no-push")
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert all(p.severity != "error" for p in a.store().problems())
        a.ok("sync", "--scope", "user")
        b.ok("sync", "--scope", "user")
        assert_consistent(a, b)
        assert {f"devbox-{i}.md", f"devbox-late-{i}.md"} <= set(files(a.user))


def test_lock_files_a_killed_git_left_are_cleared(machines: list[Machine]) -> None:
    """Whatever lock a killed git left in the store's repository (HEAD's, a branch's,
    packed-refs', the index's), the next sync clears it and syncs."""
    a, b = machines
    a.add("first", "one")
    a.ok("sync", "--scope", "user")
    gdir = a.user / ".git"
    branch = git(a.user, "rev-parse", "--abbrev-ref", "HEAD").strip()
    locks = [gdir / "HEAD.lock", gdir / "refs" / "heads" / f"{branch}.lock"]
    locks += [gdir / "packed-refs.lock", gdir / "index.lock"]
    for lock in locks:
        lock.write_text("")
        os.utime(lock, (time.time() - 60, time.time() - 60))  # left long ago
    a.add("second", "two")
    a.ok("sync", "--scope", "user")
    assert not any(lock.exists() for lock in locks)
    b.ok("sync", "--scope", "user")
    assert {"first.md", "second.md"} <= set(files(b.user))


@pytest.mark.parametrize(
    ("stderr", "kind", "says"),
    [
        ("fatal: Authentication failed for 'https://x/y.git/'", SyncError, "could not log in"),
        ("git@host: Permission denied (publickey).", SyncError, "could not log in"),
        (
            "fatal: unable to access 'https://x/': Could not resolve host: x",
            Offline,
            "cannot reach",
        ),
        (" ! [rejected]        main -> main (fetch first)", PushRejected, "was rejected"),
        (
            "error: Your local changes to the following files would be overwritten by merge:\n"
            "\tapp.py\nPlease commit your changes or stash them before you merge.",
            SyncError,
            "overwrite your uncommitted changes to app.py",
        ),
        ("fatal: 'origin' does not appear to be a git repository", SyncError, "is not set up"),
    ],
)
def test_git_failures_are_said_with_the_fix(stderr: str, kind: type, says: str) -> None:
    """Git failures are said with the fix."""
    from memdir_git.git import _explain

    err = _explain(["fetch", "-q"], stderr, "origin")
    assert isinstance(err, kind) and says in str(err) and "\n" not in str(err)


def test_sync_json_says_what_happened(machines: list[Machine]) -> None:
    """memdir sync --json reports what was committed, whether it was pushed, the scope and whether
    it was offline."""
    a, _ = machines
    a.add("tabs", "Tabs")
    data = json.loads(a.ok("sync", "--scope", "user", "--json"))
    assert data["committed"] == "memdir: 1 added" and data["pushed"] is True
    assert data["scope"] == "user" and data["offline"] is None


def test_the_first_push_to_an_empty_remote_makes_its_clones_check_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bare repository made with git's default HEAD (master): after memdir pushes main
    there, a teammate's plain 'git clone' checks the memories out."""
    remote = tmp_path / "default.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(remote, "symbolic-ref", "HEAD", "refs/heads/master")
    me = Machine(tmp_path, "me", monkeypatch)
    me.add("tabs", "Tabs for indentation")
    out = me.ok("sync", "--scope", "user", "--init", str(remote))
    assert "origin had no branch yet: its clones now check out main." in out
    git(tmp_path, "clone", "-q", str(remote), str(tmp_path / "teammate"))
    assert (tmp_path / "teammate" / "tabs.md").is_file()
