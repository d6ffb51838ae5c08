"""Changes memdir did not make — a hand edit, a deletion, a plain ``git pull`` — recorded
when memdir notices them: the replaced text in history, one operation from "hand" in the
log, and never mistaken for memdir's own writes from another process."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from memdir import MemoryStore
from memdir.config import Config

from conftest import CliFn


def _store(root: Path) -> MemoryStore:
    return MemoryStore(root, Config(dir=root, embedder="none"), watch=False)


def test_a_hand_edit_seen_by_the_next_process_goes_to_history(tmp_path: Path, cli: CliFn) -> None:
    """Edited in an editor while no memdir ran: the next process keeps the text it replaced
    as a version, logs one operation from "hand" naming it, and restore brings it back."""
    root = tmp_path / ".memory"
    store = _store(root)
    store.write("deploy", type="project_fact", description="Deploys", body="Deploy on Fridays.")
    store.close()
    path = root / "deploy.md"
    path.write_text(path.read_text().replace("Fridays", "Mondays, never Fridays"))
    fresh = _store(root)
    assert "Mondays" in fresh.get("deploy").body
    versions = fresh.history("deploy")
    assert [v.action for v in versions] == ["update"]
    assert "Fridays." in fresh.version_text("deploy", versions[0].version)
    op = fresh.log(1)[0]
    assert op.source == "hand" and [c["name"] for c in op.changes] == ["deploy"]
    assert fresh.origin("deploy").label == "hand"  # still nobody's but a hand's
    r = cli("log")
    assert "hand" in r.out and "changed outside memdir" in r.out
    fresh.restore("deploy")
    assert fresh.get("deploy").body == "Deploy on Fridays."


def test_a_deletion_by_hand_is_kept_and_restorable(tmp_path: Path) -> None:
    """A file deleted by hand: its last text is kept as a version (restore brings it back)."""
    root = tmp_path / ".memory"
    store = _store(root)
    store.write("keep-me", type="reference", description="A link", body="https://example.org")
    store.close()
    (root / "keep-me.md").unlink()
    fresh = _store(root)
    assert "keep-me" not in fresh
    assert [v.action for v in fresh.history("keep-me")] == ["delete"]
    fresh.restore("keep-me")
    assert fresh.get("keep-me").body == "https://example.org"


def test_an_edit_noticed_by_a_running_process_is_recorded(tmp_path: Path) -> None:
    """A process that is open while the file changes records it at its next read."""
    root = tmp_path / ".memory"
    store = _store(root)
    store.write("style", type="feedback", description="Style", body="Use tabs.")
    time.sleep(0.1)
    path = root / "style.md"
    path.write_text(path.read_text().replace("tabs", "four spaces"))
    store.refresh()
    assert store.get("style").body == "Use four spaces."
    assert [v.action for v in store.history("style")] == ["update"]
    assert store.log(1)[0].source == "hand"


def test_memdirs_own_writes_from_another_process_are_not_hand_edits(tmp_path: Path) -> None:
    """Writes by another memdir process (its log names them) add no "hand" operation, and
    leave only their own versions in history."""
    root = tmp_path / ".memory"
    reader = _store(root)
    writer = _store(root)
    writer.write("note", type="project_fact", description="Note", body="one")
    assert reader.get("note").body == "one"
    writer.write("note", type="project_fact", description="Note", body="two")
    writer.delete("note")
    assert "note" not in reader
    reader.refresh()
    assert [op.source for op in reader.log()] == ["api", "api", "api"]
    assert [v.action for v in reader.history("note")] == ["update", "delete"]


def test_a_plain_git_pull_is_recorded_as_a_change_from_outside(tmp_path: Path) -> None:
    """A teammate's commit arrives by plain 'git pull' (no memdir sync): the replaced text
    is kept and the change logged as not memdir's, so it never passes for the user's."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    env_git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    mine = tmp_path / "mine"
    subprocess.run(["git", "clone", "-q", str(remote), str(mine)], check=True)
    root = mine / ".memory"
    store = _store(root)
    store.write("ci", type="project_fact", description="CI", body="CI runs on GitHub Actions.")
    subprocess.run(["git", "-C", str(mine), "add", "-A"], check=True)
    subprocess.run([*env_git, "-C", str(mine), "commit", "-qm", "mine"], check=True)
    subprocess.run(["git", "-C", str(mine), "push", "-q", "origin", "HEAD"], check=True)
    theirs = tmp_path / "theirs"
    subprocess.run(["git", "clone", "-q", str(remote), str(theirs)], check=True)
    path = theirs / ".memory" / "ci.md"
    path.write_text(path.read_text().replace("GitHub Actions", "their own runner"))
    subprocess.run([*env_git, "-C", str(theirs), "commit", "-qam", "theirs"], check=True)
    subprocess.run(["git", "-C", str(theirs), "push", "-q", "origin", "HEAD"], check=True)
    subprocess.run([*env_git, "-C", str(mine), "pull", "-q", "--no-rebase"], check=True)
    store.refresh()
    assert "their own runner" in store.get("ci").body
    assert store.log(1)[0].source == "hand" and store.origin("ci").label == "hand"
    versions = store.history("ci")
    assert "GitHub Actions" in store.version_text("ci", versions[-1].version)


def test_a_copy_of_a_memory_or_its_file_renamed_is_not_a_change_to_it(tmp_path: Path) -> None:
    """A copy of the user's rule made in an editor (the same name in a second file, listed
    once), edited and then removed, and the rule's file renamed by hand: the memory's text
    never changed, so nothing is recorded — no deletion in its history or the log — and the
    rule is still the user's own."""
    root = tmp_path / ".memory"
    store = _store(root)
    store.write("indent", type="feedback", description="Indent", body="Use tabs.")
    store.close()
    copy = root / "indent (copy).md"
    copy.write_text((root / "indent.md").read_text())
    _store(root).close()  # (the copy seen: a duplicate name, not listed)
    copy.write_text(copy.read_text() + "Edited in the copy.\n")
    _store(root).close()
    copy.unlink()
    (root / "indent.md").rename(root / "indent-rule.md")
    fresh = _store(root)
    assert [e.name for e in fresh.entries()] == ["indent"]
    assert fresh.history("indent") == []
    assert [op.source for op in fresh.log()] == ["api"]  # (the library's write alone)
    assert fresh.origin("indent").users
