"""MemoryStore: writes, history, hand edits, malformed files, concurrency and crashes."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import pytest

from memdir import ConflictError, MemoryNotFound, MemoryStore, Put, Remove
from memdir import memory as memfmt
from memdir.disk.atomic import intent_pending
from memdir.disk.layout import JOURNALS, state_dir
from memdir.errors import InvalidMemory, PlanError
from memdir.memory import Memory

from conftest import CliFn

OLD = time.time() - 3600


def age(path: Path) -> None:
    """Give a file an old mtime, outside the window in which changes are re-checked."""
    os.utime(path, (OLD, OLD))


def index_names(store: MemoryStore) -> list[str]:
    text = store.index_path.read_text(encoding="utf-8")
    return sorted(line.split("]")[0][3:] for line in text.splitlines() if line.startswith("- ["))


def test_write_get_list_delete(store: MemoryStore) -> None:
    """The basic API writes files, lists them sorted, and deletes them."""
    store.write("b-fact", type="project_fact", description="B", body="bee")
    store.write("a-pref", type="user_preference", description="A", body="ay")
    assert [m.name for m in store.list()] == ["a-pref", "b-fact"]
    assert store.get("b-fact").body == "bee"
    assert (store.root / "b-fact.md").is_file()
    store.delete("b-fact")
    with pytest.raises(MemoryNotFound):
        store.get("b-fact")
    assert index_names(store) == ["a-pref"]


def test_index_lists_metadata_never_bodies(store: MemoryStore) -> None:
    """MEMORY.md has one line per memory with link, description and type, grouped by type."""
    store.write("p", type="user_preference", description="Prefers tabs", body="SECRET-BODY")
    store.write("f", type="project_fact", description="Uses Postgres 16", body="details")
    text = store.index_path.read_text(encoding="utf-8")
    assert "- [p](p.md) — Prefers tabs\n" in text
    assert "- [f](f.md) — Uses Postgres 16\n" in text
    assert text.index("## user_preference") < text.index("## project_fact")
    assert "SECRET-BODY" not in text and "details" not in text


def test_created_kept_updated_bumped_and_history(store: MemoryStore) -> None:
    """Overwriting keeps `created`, stores the previous version, and restore brings it back."""
    first = store.write("n", type="user_preference", description="d", body="v1")
    second = store.write("n", type="user_preference", description="d", body="v2")
    assert second.created == first.created and second.body == "v2"
    versions = store.history("n")
    assert [v.version for v in versions] == [1] and versions[0].action == "update"
    assert "v1" in store.version_text("n", 1)
    store.restore("n")
    assert store.get("n").body == "v1"
    assert [v.body for v in (memfmt.loads(store.version_text("n", i)) for i in (1, 2))] == [
        "v1",
        "v2",
    ]


def test_identical_write_is_a_no_op(store: MemoryStore) -> None:
    """Writing the same content again changes nothing and adds no history."""
    store.write("n", type="user_preference", description="d", body="same")
    before = (store.root / "n.md").read_bytes()
    assert store.apply([Put(Memory("n", "user_preference", "d", "same"))]) is None
    assert (store.root / "n.md").read_bytes() == before and store.history("n") == []


def test_deleted_memory_can_be_restored(store: MemoryStore) -> None:
    """Deleting keeps the last version; restore recreates the file."""
    store.write("gone", type="reference", description="link", body="https://example.org")
    store.delete("gone", reason="test")
    assert store.history("gone")[-1].reason == "test"
    assert store.restore("gone").body == "https://example.org"


def test_restore_unknown_version(store: MemoryStore) -> None:
    """Asking for a version that does not exist is a clear MemoryNotFound."""
    store.write("n", type="user_preference", description="d", body="1")
    store.write("n", type="user_preference", description="d", body="2")
    with pytest.raises(MemoryNotFound, match="has no version 7"):
        store.restore("n", 7)


def test_user_keys_preserved_on_rewrite(store: MemoryStore) -> None:
    """Keys added by hand survive an update through the API."""
    store.write("n", type="user_preference", description="d", body="1")
    path = store.root / "n.md"
    path.write_text(path.read_text().replace("---\n1", "tags:\n- x\npinned: true\n---\n1"))
    store.write("n", type="user_preference", description="d2", body="2")
    m = store.get("n")
    assert m.extra == {"tags": ["x"], "pinned": True} and m.description == "d2"


def test_conflict_when_file_changed_since_read(store: MemoryStore) -> None:
    """Overwriting with a stale digest is refused; the hand edit is kept."""
    m = store.write("n", type="user_preference", description="d", body="mine")
    (store.root / "n.md").write_text(memfmt.dumps(m.replace(body="edited by hand")))
    with pytest.raises(ConflictError, match="changed on disk"):
        store.apply([Put(m.replace(body="overwrite"), expect=m.digest)])
    assert store.get("n").body == "edited by hand"


def test_overwrite_after_hand_edit_keeps_the_edit_in_history(store: MemoryStore) -> None:
    """Without a digest, an automatic overwrite still archives the hand-edited text."""
    m = store.write("n", type="user_preference", description="d", body="mine")
    (store.root / "n.md").write_text(memfmt.dumps(m.replace(body="hand edit")))
    store.write("n", type="user_preference", description="d", body="auto")
    assert "hand edit" in store.version_text("n", store.history("n")[-1].version)


def test_hand_add_edit_rename_delete_are_noticed(store: MemoryStore) -> None:
    """The index follows files added, edited, renamed and deleted by hand on the next call."""
    root = store.root
    (root / "by-hand.md").write_text(
        "---\nname: by-hand\ntype: project_fact\ndescription: added by hand\n---\nbody\n"
    )
    assert [e.name for e in MemoryStore(root).entries()] == ["by-hand"]
    assert "added by hand" in store.index_path.read_text()
    (root / "by-hand.md").write_text(
        "---\nname: by-hand\ntype: project_fact\ndescription: edited\n---\nbody\n"
    )
    MemoryStore(root)
    assert "edited" in store.index_path.read_text()
    os.rename(root / "by-hand.md", root / "renamed.md")
    entries = MemoryStore(root).entries()
    assert [(e.name, e.file) for e in entries] == [("by-hand", "renamed.md")]
    assert "(renamed.md)" in store.index_path.read_text()
    os.unlink(root / "renamed.md")
    assert MemoryStore(root).entries() == [] and "No memories yet" in store.index_path.read_text()


def test_unchanged_files_are_not_reparsed(store: MemoryStore) -> None:
    """The metadata cache is keyed by file identity: same size, mtime and inode, no re-parse."""
    store.write("n", type="user_preference", description="original", body="b")
    path = store.root / "n.md"
    age(path)
    store.refresh()
    st = path.stat()
    text = path.read_text()
    with open(path, "r+", encoding="utf-8") as fh:  # same length, same inode
        fh.write(text.replace("original", "ORIGINAL"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert MemoryStore(store.root).entries()[0].description == "original"
    os.utime(path, (OLD + 5, OLD + 5))  # a changed mtime makes it re-read
    assert MemoryStore(store.root).entries()[0].description == "ORIGINAL"


def test_index_not_rewritten_when_nothing_changed(store: MemoryStore) -> None:
    """MEMORY.md keeps its inode and mtime when the memories did not change."""
    store.write("n", type="user_preference", description="d", body="b")
    st = store.index_path.stat()
    MemoryStore(store.root).entries()
    store.refresh()
    st2 = store.index_path.stat()
    assert (st.st_ino, st.st_mtime_ns) == (st2.st_ino, st2.st_mtime_ns)


def test_index_repaired_after_hand_damage(store: MemoryStore) -> None:
    """A deleted or edited MEMORY.md is regenerated on the next open."""
    store.write("n", type="user_preference", description="d", body="b")
    good = store.index_path.read_text()
    store.index_path.write_text("garbage")
    MemoryStore(store.root)
    assert store.index_path.read_text() == good
    store.index_path.unlink()
    MemoryStore(store.root)
    assert store.index_path.read_text() == good


def test_malformed_files_reported_untouched_and_never_break_listing(store: MemoryStore) -> None:
    """Bad YAML, missing fields, binary and oversized files are skipped and left as they are."""
    store.write("good", type="user_preference", description="ok", body="b")
    bad = {
        "bad-yaml.md": b"---\nname: [oops\n---\n",
        "missing.md": b"---\nname: missing\n---\nbody\n",
        "binary.md": b"---\x00\x01\x02",
        "huge.md": b"---\nname: huge\ntype: t\ndescription: d\n---\n" + b"x" * 300_000,
        "latin1.md": "---\nname: é\n---\n".encode("latin-1"),
        "utf16.md": "---\nname: u\ntype: t\ndescription: d\n---\nb\n".encode("utf-16"),
    }
    for fname, data in bad.items():
        (store.root / fname).write_bytes(data)
    fresh = MemoryStore(store.root)
    assert [e.name for e in fresh.entries()] == ["good"]
    assert index_names(fresh) == ["good"]
    reasons = {p.file: p.reason for p in fresh.problems() if p.severity == "error"}
    assert set(reasons) == set(bad)
    assert "bad YAML" in reasons["bad-yaml.md"] and "binary" in reasons["binary.md"]
    assert "KiB limit" in reasons["huge.md"]
    assert reasons["latin1.md"] == "not UTF-8 text (byte 11) — save it again as UTF-8"
    assert reasons["utf16.md"] == "UTF-16 text, not UTF-8 — save it again as UTF-8"
    for fname, data in bad.items():
        assert (store.root / fname).read_bytes() == data


def test_rule_bending_memory_is_listed_with_warning(store: MemoryStore) -> None:
    """Liberal reading: an unknown type or long description is listed, and doctor warns."""
    (store.root / "odd.md").write_text(
        "---\nname: odd\ntype: idea\ndescription: " + "long " * 60 + "\n---\nbody\n"
    )
    fresh = MemoryStore(store.root)
    assert [e.name for e in fresh.entries()] == ["odd"]
    warnings = [p.reason for p in fresh.problems() if p.severity == "warning"]
    assert any("unknown type 'idea'" in w for w in warnings)


def test_symlinks_are_not_followed(store: MemoryStore, tmp_path: Path) -> None:
    """A symlinked memory file is reported, not read, and a write does not go through it."""
    outside = tmp_path / "outside.md"
    outside.write_text("---\nname: link\ntype: user_preference\ndescription: d\n---\nsecret\n")
    (store.root / "link.md").symlink_to(outside)
    fresh = MemoryStore(store.root)
    assert fresh.entries() == []
    assert any("symbolic link" in p.reason for p in fresh.problems())
    with pytest.raises(ConflictError):
        fresh.write("link", type="user_preference", description="d", body="x")
    assert "secret" in outside.read_text()


def test_duplicate_names_reported(store: MemoryStore) -> None:
    """Two files claiming one name: the one named after it wins, the other is reported."""
    store.write("n", type="user_preference", description="d", body="b")
    (store.root / "copy.md").write_text((store.root / "n.md").read_text())
    fresh = MemoryStore(store.root)
    assert [e.file for e in fresh.entries()] == ["n.md"]
    assert any(p.file == "copy.md" and "duplicate" in p.reason for p in fresh.problems())
    reason = next(p.reason for p in fresh.problems() if p.file == "copy.md")
    assert reason.endswith("delete this one") and "\n" not in reason


def test_plan_is_validated_before_anything_changes(store: MemoryStore) -> None:
    """A plan with one bad change applies nothing."""
    store.write("keep", type="user_preference", description="d", body="b")
    bad_plans: list[tuple[list[Put | Remove], type[Exception]]] = [
        (
            [Put(Memory("new1", "user_preference", "d")), Put(Memory("x", "nope", "d"))],
            InvalidMemory,
        ),
        ([Put(Memory("new1", "user_preference", "d")), Remove("missing")], MemoryNotFound),
        (
            [
                Put(Memory("new1", "user_preference", "d")),
                Put(Memory("new1", "user_preference", "e")),
            ],
            PlanError,
        ),
    ]
    for plan, error in bad_plans:
        with pytest.raises(error):
            store.apply(plan)
    assert [e.name for e in store.entries()] == ["keep"]


def test_apply_logs_operations(store: MemoryStore) -> None:
    """Each applied plan is one log entry with its changes and the versions they replaced."""
    store.write("a", type="user_preference", description="d", body="1")
    op = store.apply(
        [Put(Memory("a", "user_preference", "d", "2")), Put(Memory("b", "project_fact", "d", "x"))],
        source="test",
        summary="two changes",
    )
    assert op is not None
    last = store.log()[-1]
    assert last.id == op.id and last.source == "test"
    assert [(c["name"], c["action"], c["before"]) for c in last.changes] == [
        ("a", "update", 1),
        ("b", "create", None),
    ]


def test_unicode_name_maps_to_safe_file(store: MemoryStore) -> None:
    """A Chinese name is stored under its own, safe, file name and indexed."""
    store.write(
        "用户语言偏好",
        type="user_preference",
        description="用户偏好用中文交流和回复",
        body="用户希望所有回复使用简体中文。",
    )
    assert (store.root / "用户语言偏好.md").is_file()
    assert index_names(store) == ["用户语言偏好"]


def test_memdirs_own_state_lives_outside_the_store_folder(store: MemoryStore) -> None:
    """History, the log and the caches live in the user's state folder, keyed by the store's
    real path: nothing of memdir's own is in the folder a repository holds."""
    store.write("a", type="project_fact", description="A", body="one")
    store.write("a", type="project_fact", description="A", body="two")
    assert store.internal == state_dir(store.root) and store.internal.is_dir()
    assert not store.root.joinpath(".memdir").exists()
    assert not store.root.joinpath(".gitignore").exists()
    assert sorted(p.name for p in store.root.iterdir()) == ["MEMORY.md", "a.md"]
    assert (store.internal / "history" / "a" / "0001.md").is_file()
    assert os.stat(store.internal).st_mode & 0o077 == 0


def test_memory_files_get_ordinary_permissions(store: MemoryStore) -> None:
    """Files are created with the mode open() would give (umask), not a temp file's 0600."""
    store.write("n", type="user_preference", description="d", body="b")
    mask = os.umask(0)
    os.umask(mask)
    assert (store.root / "n.md").stat().st_mode & 0o777 == 0o666 & ~mask


# -- several processes ---------------------------------------------------------------------


def _writer(root: str, worker: int, count: int) -> None:
    store = MemoryStore(root)
    for i in range(count):
        store.write(
            f"w{worker}-{i}",
            type="project_fact",
            description=f"worker {worker} #{i}",
            body=f"value {worker}/{i}",
        )
        if i % 10 == 0:  # also overwrite a shared memory, to contend on one file
            store.write("shared", type="project_fact", description="shared", body=f"{worker}/{i}")


@pytest.mark.slow
def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    """8 processes x 50 writes: every memory present, index complete, history complete."""
    root = tmp_path / ".memory"
    MemoryStore(root)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(root), w, 50)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = MemoryStore(root)
    names = {e.name for e in store.entries()}
    expected = {f"w{w}-{i}" for w in range(8) for i in range(50)} | {"shared"}
    assert names == expected
    assert set(index_names(store)) == expected
    assert store.get("w3-17").body == "value 3/17"
    assert len(store.history("shared")) == 8 * 5 - 1  # every overwrite kept
    assert not [p for p in store.problems() if p.severity == "error"]


# -- crashes -------------------------------------------------------------------------------


def _crashing_writer(root: str, ack_fd: int, seed: int) -> None:
    rng = random.Random(seed)
    store = MemoryStore(root)
    i = 0
    while True:
        i += 1
        name = f"m{rng.randrange(12)}"
        if rng.random() < 0.2:
            plan = [
                Put(Memory(f"batch{k}", "project_fact", f"batch {i}", f"b{i}")) for k in range(4)
            ]
            os.write(ack_fd, f"start batch {i}\n".encode())
            store.apply(plan)
            os.write(ack_fd, f"done batch {i}\n".encode())
        else:
            os.write(ack_fd, f"start {name} {i}\n".encode())
            store.write(name, type="project_fact", description="d", body=f"v{i}")
            os.write(ack_fd, f"done {name} {i}\n".encode())


@pytest.mark.slow
def test_sigkill_at_random_points_loses_nothing(tmp_path: Path) -> None:
    """A writer killed at random instants leaves a store that opens consistent, nothing lost."""
    root = tmp_path / ".memory"
    MemoryStore(root)
    rng = random.Random(1234)
    acked: dict[str, str] = {}
    for iteration in range(40):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            os.close(r)
            try:
                _crashing_writer(str(root), w, iteration)
            finally:
                os._exit(0)
        os.close(w)
        time.sleep(rng.uniform(0.005, 0.08))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        with os.fdopen(r) as fh:
            log = fh.read().splitlines()
        inflight: dict[str, str] = {}
        for line in log:
            parts = line.split()
            if parts[0] == "start":
                names = [f"batch{k}" for k in range(4)] if parts[1] == "batch" else [parts[1]]
                inflight = {n: ("b" if parts[1] == "batch" else "v") + parts[2] for n in names}
            elif parts[0] == "done" and len(parts) == 3:
                acked.update(inflight)
                inflight = {}
        store = MemoryStore(root)  # recovery happens here
        assert not any(intent_pending(state_dir(root) / n) for n in JOURNALS)  # finished
        leftovers = [p.name for d in (root, state_dir(root)) for p in d.iterdir()]
        assert not [n for n in leftovers if n.startswith(".tmp-")]
        bodies = {m.name: m.body for m in store.list()}
        for name, body in acked.items():
            assert bodies[name] in {body, inflight.get(name)}, (iteration, name)
        batch = {bodies.get(f"batch{k}") for k in range(4)}
        assert len(batch) == 1, f"batch applied partially: {batch}"  # all or nothing
        if inflight and bodies.get(next(iter(inflight))) == next(iter(inflight.values())):
            acked.update(inflight)  # the in-flight change made it; it is the baseline now
        assert set(index_names(store)) == set(bodies)
        assert not [p for p in store.problems() if p.severity == "error"]
    assert len(acked) > 5


@pytest.mark.parametrize("journal", JOURNALS)
def test_unreadable_journal_is_kept_aside(tmp_path: Path, journal: str) -> None:
    """A journal memdir cannot read (this version's, or the one earlier versions write) is
    moved aside, not executed or deleted."""
    root = tmp_path / ".memory"
    MemoryStore(root)
    (state_dir(root) / journal).write_text("{not json")
    MemoryStore(root)
    kept = list((state_dir(root)).glob("journal.unreadable.*"))
    assert len(kept) == 1 and kept[0].read_text() == "{not json"


def test_log_survives_a_torn_last_line(store: MemoryStore) -> None:
    """A partly written log line (crash) is skipped, not fatal."""
    store.write("a", type="user_preference", description="d", body="1")
    with open(store.internal / "log.jsonl", "a") as fh:
        fh.write('{"id": "broken')
    assert [op.changes[0]["name"] for op in store.log()] == ["a"]
    assert json.loads((store.internal / "log.jsonl").read_text().splitlines()[0])["source"]


def test_hand_written_notes_follow_one_rule(cli: CliFn, tmp_path: Path) -> None:
    """A Markdown file without frontmatter is reported (not silently skipped) and
    'doctor --fix' makes it a memory by the memory tool's rule; hand-written memories without
    timestamps are valid and draw no warning."""
    root = tmp_path / ".memory"
    (root / "deploy-notes.md").write_text("# Deploys\nWe deploy on Fridays after lunch.\n")
    for i in range(5):
        (root / f"hand-{i}.md").write_text(
            f"---\nname: hand-{i}\ntype: project_fact\ndescription: Hand note {i}\n---\nText {i}.\n"
        )
    r = cli("doctor")
    assert "deploy-notes.md: a note without frontmatter" in r.out
    assert "timestamps" not in r.out
    assert "deploy-notes" not in cli("list").out
    r = cli("doctor", "--fix")
    assert "deploy-notes.md: a note without frontmatter is now the memory deploy-notes" in r.out
    mem = MemoryStore(root).get("deploy-notes")
    assert (mem.type, mem.description) == ("project_fact", "Deploys")
    assert mem.body == "# Deploys\nWe deploy on Fridays after lunch."
    assert "deploy-notes" in cli("list").out


def test_log_keeps_the_order_within_a_second(cli: CliFn, store: MemoryStore) -> None:
    """The log keeps the order of operations within one second."""
    for i in range(6):
        store.write("db", type="project_fact", description=f"Postgres {i}", body=f"v{i}")
    lines = [ln for ln in cli("log").out.splitlines() if ln.startswith("    ")]
    assert [ln.split()[0] for ln in lines] == ["create"] + ["update"] * 5


def test_undo_after_a_hand_edit_takes_back_the_hand_edit_first(
    cli: CliFn, store: MemoryStore
) -> None:
    """A hand edit is a change of its own (recorded when memdir notices it): undo takes it
    back first, keeping its text in history, then memdir's write before it."""
    store.write("db", type="project_fact", description="Postgres", body="v1")
    store.write("db", type="project_fact", description="Postgres", body="v2")
    path = store.root / "db.md"
    path.write_text(path.read_text().replace("v2", "v3 by hand"))
    r = cli("undo")
    assert r.code == 0 and "Reverted hand" in r.out and "v2" in path.read_text()
    assert any("v3 by hand" in store.version_text("db", v.version) for v in store.history("db"))
    r = cli("undo")
    assert r.code == 0 and "v1" in path.read_text()


def test_undo_does_not_run_over_a_hand_edit_not_recorded_yet(
    cli: CliFn, store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hand edit memdir has not recorded (its lock was busy when it looked) is never run
    over by undo without --force, and is kept in history when forced."""
    from memdir.store.files import MemoryStore as Folder

    monkeypatch.setattr(Folder, "_record_hand", lambda self, before: None)
    store.write("db", type="project_fact", description="Postgres", body="v1")
    store.write("db", type="project_fact", description="Postgres", body="v2")
    path = store.root / "db.md"
    path.write_text(path.read_text().replace("v2", "v3 by hand"))
    r = cli("undo")
    assert r.code == 1 and "db was changed after" in r.err and "--force" in r.err
    assert "v3 by hand" in path.read_text()
    r = cli("undo", "--force")
    assert r.code == 0 and "v1" in path.read_text()
    assert any("v3 by hand" in store.version_text("db", v.version) for v in store.history("db"))


def test_a_secret_in_a_hand_written_key_does_not_survive_an_update(store: MemoryStore) -> None:
    """A secret in a hand-written frontmatter key does not survive an update."""
    path = store.root / "ci.md"
    path.write_text(
        "---\nname: ci\ntype: reference\ndescription: CI\ntoken: ghp_"
        + "Ab1" * 12
        + "\n---\nCI notes.\n"
    )
    store.write("ci", type="reference", description="CI", body="CI notes, updated.")
    assert "ghp_" not in path.read_text() and "[REDACTED:" in path.read_text()


def test_a_missing_dir_is_an_error_even_with_a_user_store(cli: CliFn, tmp_path: Path) -> None:
    """A missing --dir is an error even with a user store."""
    assert cli("add", "tabs", "--type", "user_preference", "-d", "Tabs", "--body", "t").code == 0
    r = cli("--dir", str(tmp_path / "typo"), "list")
    assert r.code == 1 and "no memory store at" in r.err and r.out == ""


def test_undo_goes_back_through_its_own_restores(store: MemoryStore) -> None:
    """A memory memdir itself rewrote since (an undo restoring it, in a later second) is not
    a hand edit: the next undo goes on."""
    from memdir.undo import undo

    def next_second() -> None:
        start = memfmt.now()
        while memfmt.now() == start:
            time.sleep(0.05)

    store.write("n", type="project_fact", description="N", body="a")
    next_second()
    store.write("n", type="project_fact", description="N", body="b")
    next_second()
    undo(store)  # back to "a", written now with a new timestamp
    assert store.get("n").body == "a"
    next_second()
    undo(store)  # the add of "n": undone, although its file is no longer the add's bytes
    assert "n" not in store


def _write_until(root: str, step: int) -> None:
    """In a child process: update memory ``a`` and add ``b``, ending the process at once at
    the ``step``-th change the write makes to a file (each open for writing, rename or
    unlink, seen through Python's audit events)."""
    import sys

    seen = 0

    def hook(event: str, args: tuple[object, ...]) -> None:
        nonlocal seen
        writes = event in ("os.rename", "os.remove") or (
            event == "open" and isinstance(args[2], int) and args[2] & (os.O_WRONLY | os.O_RDWR)
        )
        if writes:
            seen += 1
            if seen == step:
                os._exit(3)

    store = MemoryStore(root)
    sys.addaudithook(hook)
    store.apply(
        [
            Put(Memory("a", "project_fact", "A, second version", "second")),
            Put(Memory("b", "project_fact", "B", "b body")),
        ]
    )


def test_a_crash_at_every_step_of_a_write_loses_nothing_and_memory_md_is_corrected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer ended at each of the changes a write makes (the intent, the history copy, the
    memory files, MEMORY.md — renamed into place without a sync of its own —, the log): the
    next reader finishes or undoes the write whole, keeps every text (in its file or in
    history), and the MEMORY.md it leaves lists exactly the memories there are."""
    monkeypatch.setenv("MEMDIR_BACKGROUND", "off")  # (no worker touches the seed's index)
    seed = tmp_path / "seed" / ".memory"
    with MemoryStore(seed) as seeded:
        seeded.write("a", type="project_fact", description="A", body="first")
    step, finished = 0, False
    while not finished:
        step += 1
        assert step < 60, "a write of two memories made over 60 changes"
        root = tmp_path / f"run{step}" / ".memory"
        import shutil

        shutil.copytree(seed, root)
        shutil.copytree(state_dir(seed), state_dir(root))
        pid = os.fork()
        if pid == 0:
            try:
                _write_until(str(root), step)
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        finished = os.waitstatus_to_exitcode(status) == 0
        store = MemoryStore(root)  # the reader: recovery, and MEMORY.md checked
        bodies = {m.name: m.body for m in store.list()}
        assert bodies.get("a") in ("first", "second"), (step, bodies)
        assert ("b" in bodies) == (bodies["a"] == "second"), (step, bodies)  # all or nothing
        kept = {store.version_text("a", v.version) for v in store.history("a")}
        assert bodies["a"] == "first" or any("first" in t for t in kept), step
        listed = (root / "MEMORY.md").read_text()
        assert ("[b](b.md)" in listed) == ("b" in bodies), (step, listed)
        assert not any(intent_pending(state_dir(root) / n) for n in JOURNALS), step
    assert step > 8  # (the write made several changes, each one a crash point)


def test_a_renamed_project_keeps_its_state_and_a_copy_gets_none(tmp_path: Path) -> None:
    """``mv proj proj2``: history, who wrote each rule and the rules standing come along; a
    copy of the folder (``cp -r``, as a clone is) inherits nothing: its rules wait."""
    import shutil

    from memdir.standing import standing

    proj = tmp_path / "proj"
    store = MemoryStore(proj / ".memory")
    store.write("tabs", type="feedback", description="Tabs", body="Indent with tabs.")
    store.write("tabs", type="feedback", description="Tabs", body="Indent with tabs, width 4.")
    moved = tmp_path / "proj2"
    os.rename(proj, moved)
    copy = tmp_path / "proj3"
    shutil.copytree(moved, copy)
    here = MemoryStore(moved / ".memory")
    assert len(here.history("tabs")) == 1 and here.origin("tabs").users
    assert "Indent with tabs, width 4." in standing(here, 2000, 200, 25_000).text
    there = MemoryStore(copy / ".memory")
    assert there.history("tabs") == [] and not there.origin("tabs").users
    text = standing(there, 2000, 200, 25_000).text
    assert "width 4" not in text and "came from elsewhere" in text
