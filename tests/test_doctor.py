"""memdir doctor: the health report and the repairs that are always safe."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from memdir import MemoryStore
from memdir.disk.layout import JOURNALS
from memdir.doctor import STALE_TEMP_SECONDS, diagnose

from conftest import CliFn


def test_a_healthy_store_has_nothing_to_say(store: MemoryStore) -> None:
    """A healthy store has nothing to say."""
    store.write("tabs", type="user_preference", description="Tabs", body="x")
    report = diagnose(store)
    assert report.memories == 1 and not report.errors and not report.warnings
    assert report.lines()[-1] == "No problems found."


def test_rule_bending_memories_and_broken_files_are_reported_never_changed(
    store: MemoryStore,
) -> None:
    """Memories that bend the rules and broken files are reported, never changed."""
    (store.root / "odd.md").write_text("---\nname: odd\ntype: mood\ndescription: ''\n---\nx\n")
    (store.root / "broken.md").write_text("---\nname: [\n---\n")
    before = {p.name: p.read_bytes() for p in store.root.glob("*.md")}
    report = diagnose(store, fix=True)
    reasons = {(w["file"], w["reason"]) for w in report.warnings}
    assert ("odd.md", "empty description") in reasons
    assert any(e["file"] == "broken.md" for e in report.errors)
    assert {p.name: p.read_bytes() for p in store.root.glob("*.md") if p.name != "MEMORY.md"} == {
        k: v for k, v in before.items() if k != "MEMORY.md"
    }


def test_temporary_files_of_interrupted_writers_are_reported_and_removed_by_fix(
    store: MemoryStore,
) -> None:
    """Temporary files of interrupted writers are reported and removed by fix."""
    stale = store.internal / ".tmp-stale.part"
    fresh = store.internal / ".tmp-fresh.part"
    for p in (stale, fresh):
        p.write_text("half a write")
    old = time.time() - STALE_TEMP_SECONDS - 60
    os.utime(stale, (old, old))
    warning = diagnose(store).warnings[0]["reason"]
    assert "2 temporary files" in warning and "1 older than an hour" in warning
    report = diagnose(store, fix=True)  # holding the lock: no writer is half-way, all go
    assert not stale.exists() and not fresh.exists()
    assert "rebuilt MEMORY.md and the store's index" in report.fixed
    assert not diagnose(store).warnings


def test_a_note_without_frontmatter_becomes_a_memory_with_fix(store: MemoryStore) -> None:
    """A note without frontmatter becomes a memory with fix."""
    (store.root / "deploy-notes.md").write_text("Deploy with make deploy on Fridays never.\n")
    store.refresh()
    assert any("without frontmatter" in w["reason"] for w in diagnose(store).warnings)
    report = diagnose(store, fix=True)
    assert any("is now the memory deploy-notes" in f for f in report.fixed)
    assert store.get("deploy-notes").body.startswith("Deploy with make deploy")


def test_a_damaged_cache_is_reported_and_rebuilt(store: MemoryStore) -> None:
    """A damaged cache is reported and rebuilt."""
    store.write("tabs", type="user_preference", description="Tabs", body="x")
    store.search("tabs")
    store.close()
    (store.internal / "index.sqlite").write_bytes(b"this is not a database" * 100)
    fresh = MemoryStore(store.root)
    report = diagnose(fresh)
    assert any("damaged cache" in w["reason"] for w in report.warnings) or [
        h.name for h in fresh.search("tabs")
    ] == ["tabs"]
    diagnose(fresh, fix=True)
    assert [h.name for h in MemoryStore(store.root).search("tabs")] == ["tabs"]


def test_doctor_speaks_of_empty_files_misnamed_memories_and_the_user_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty file is never made a memory (delete it); a memory whose name is not its
    file's is said to be; outside any project, doctor checks the person's own store."""
    from machines import Machine

    store = MemoryStore(tmp_path / "proj" / ".memory")
    store.write("tabs", type="user_preference", description="Tabs", body="Tabs.")
    (store.root / "empty.md").write_text("\n  \n")
    (store.root / "other.md").write_text(
        "---\nname: renamed\ntype: project_fact\ndescription: Renamed\n---\nx\n"
    )
    me = Machine(tmp_path, "me", monkeypatch)
    out = me("doctor", "--fix", cwd=tmp_path / "proj").out
    assert "empty.md: an empty file — delete it" in out
    assert "other.md: its name is 'renamed', not the file's" in out
    assert "empty" not in {e.name for e in MemoryStore(store.root).entries()}
    me.add("prefer-tabs", "Tabs")
    elsewhere = tmp_path / "nowhere"
    elsewhere.mkdir()
    res = me("doctor", cwd=elsewhere)
    assert res.code == 0 and "checking your own store" in res.err and "1 memory" in res.out


def test_undoing_an_adoption_puts_the_note_back_as_it_was(tmp_path: Path) -> None:
    """doctor --fix makes a bare note a memory; undo returns the person's file byte for byte
    (it used to delete it, the text only in history)."""
    from memdir.undo import undo

    store = MemoryStore(tmp_path / ".memory")
    store.write("tabs", type="user_preference", description="Tabs", body="Tabs.")
    note = "\ufeff# Deploy checklist\n\n- run the tests\n- tag the release\n\n"
    (store.root / "deploy-checklist.md").write_bytes(note.encode("utf-8"))
    report = diagnose(store, fix=True)
    assert any("deploy-checklist.md: a note without frontmatter is now" in f for f in report.fixed)
    assert "deploy-checklist" in {e.name for e in store.entries()}
    undo(store)
    assert (store.root / "deploy-checklist.md").read_bytes() == note.encode("utf-8")
    assert "deploy-checklist" not in {e.name for e in MemoryStore(store.root).entries()}


def test_doctor_fix_quotes_a_colon_in_a_hand_written_value(tmp_path: Path) -> None:
    """'description: Note: the port is 8080' is bad YAML (a mapping inside a value): doctor
    names it, --fix quotes it so the memory is listed, and keeps the file as it was."""
    store = MemoryStore(tmp_path / ".memory")
    text = (
        "---\nname: api-port\ntype: project_fact\ndescription: Note: the port is 8080\n---\n8080\n"
    )
    (store.root / "api-port.md").write_text(text)
    report = diagnose(store)
    assert any("holds ': ' unquoted" in w["reason"] for w in report.warnings)
    diagnose(store, fix=True)
    fresh = MemoryStore(store.root)
    assert fresh.get("api-port").description == "Note: the port is 8080"
    assert (store.internal / "adopted" / "api-port.md").read_text() == text


@pytest.mark.parametrize("journal", JOURNALS)
def test_an_unfinished_operation_is_reported_whichever_version_left_it(
    store: MemoryStore, journal: str
) -> None:
    """An intent in this version's journal or in the one earlier versions write is an error
    to report; a blank or empty one (a finished operation) is not."""
    store.write("a", type="project_fact", description="a fact", body="x")
    assert not [e for e in diagnose(store).errors if "unfinished" in e["reason"]]
    (store.internal / journal).write_text('{"id": "x", "steps": []}')
    (found,) = [e for e in diagnose(store).errors if "unfinished" in e["reason"]]
    assert found["file"] == str(store.internal / journal)


def test_many_rules_from_elsewhere_are_one_line_on_a_terminal(tmp_path: Path, cli: CliFn) -> None:
    """A cloned repository's dozens of rules: doctor says how many wait and how to take them in
    one line (five or fewer: one line each, with their commands); --json keeps one each."""
    import json

    root = tmp_path / ".memory"
    for i in range(7):
        (root / f"rule-{i}.md").write_text(
            f"---\nname: rule-{i}\ntype: feedback\ndescription: Rule {i}\n---\nRule {i}.\n"
        )
    r = cli("doctor")
    lines = [line for line in r.out.splitlines() if "from elsewhere" in line]
    assert lines == [
        "warning: .: 7 rules from elsewhere (rule-0, rule-1, rule-2 and 4 more) are not your"
        " instructions and do not stand until you accept them: 'memdir review' lists them with"
        " where each came from, 'memdir accept --all' shows each and asks you (never one that"
        " orders the agent about)"
    ], r.out
    data = json.loads(cli("doctor", "--json").out)
    assert len([w for w in data["warnings"] if "from elsewhere" in w["reason"]]) == 7
    for i in range(2, 7):
        (root / f"rule-{i}.md").unlink()
    r = cli("doctor")
    assert (
        "rule-1.md: a rule from elsewhere (from: hand)" in r.out
        and "'memdir accept rule-1'" in r.out
    )
