"""A forked copy doing part of a long loop: its answer, its failures, when it is not used, and
the first open of a store whose files it parses half of.

Forking is only done from a process with one thread, and the test process has others (an
embedder's, a server's), so each check runs in a fresh process of its own (``fresh``)."""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memdir import MemoryStore, forked, index, memfile
from memdir.layout import state_dir

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="memdir forks on Linux alone")


def fresh(check: Callable[..., None], *args: Any) -> None:
    """Run ``check`` in a new single-threaded Python process; its failure fails the test."""
    process = multiprocessing.get_context("spawn").Process(target=check, args=args)
    process.start()
    process.join(120)
    assert process.exitcode == 0, f"{check.__name__} failed in its process (see its stderr)"


def _answers() -> None:
    assert forked.can_fork(), "one thread and two cores: forking is allowed"
    child = forked.start(lambda: [("a", 1, None, True, ("w",)), "why not"])
    assert child is not None and child.pid != os.getpid()
    assert child.result() == [("a", 1, None, True, ("w",)), "why not"]
    assert child.status == 0 and child.fd == -1


def test_the_child_answers_with_what_its_work_returned() -> None:
    fresh(_answers)


def _boom() -> list[str]:
    raise ValueError("bad file")


def _fails() -> None:
    for work in (_boom, lambda: [object()]):  # (raises; an answer marshal cannot carry)
        child = forked.start(work)
        assert child is not None
        assert child.result() is None
        assert child.status == 1


def test_a_child_whose_work_fails_answers_none() -> None:
    fresh(_fails)


def _abandoned() -> None:
    started = os.pipe()

    def forever() -> None:
        os.write(started[1], b"x")
        while True:
            pass

    child = forked.start(forever)
    assert child is not None
    assert os.read(started[0], 1) == b"x"  # it is at work
    child.abandon()
    assert child.status == -9  # (killed)
    try:
        os.waitpid(child.pid, os.WNOHANG)
    except ChildProcessError:
        pass  # reaped: no zombie left
    else:
        raise AssertionError("the child was not reaped")


def test_an_abandoned_child_is_stopped_and_reaped() -> None:
    fresh(_abandoned)


def _threads() -> None:
    assert forked.can_fork()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not forked.can_fork()
        assert forked.start(lambda: 1) is None
    finally:
        stop.set()
        thread.join()


def test_no_fork_while_another_thread_runs() -> None:
    fresh(_threads)


def test_no_fork_in_a_process_with_other_threads() -> None:
    """This very process (pytest, with an embedder's or a server's threads) does not fork."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert forked.start(lambda: 1) is None
    finally:
        stop.set()
        thread.join()


def _hand_written(root: Path) -> None:
    root.mkdir(parents=True)
    for i in range(40):
        head = f"name: note-{i:02d}\ntype: project_fact\ndescription: fact {i} | *odd*\n"
        (root / f"note-{i:02d}.md").write_text(f"---\n{head}---\nbody {i}\n")
    (root / "broken.md").write_text("---\nname: [unclosed\n---\n")
    (root / "bare.md").write_text("no frontmatter at all\n")
    (root / "odd-type.md").write_text("---\nname: odd-type\ntype: custom\ndescription: ''\n---\n")
    (root / "twin.md").write_text(
        "---\nname: note-03\ntype: project_fact\ndescription: twin\n---\n"
    )
    (root / "binary.md").write_bytes(b"---\nname: bin\x00\n---\n")


def _opened(root: Path) -> tuple[dict[str, Any], list[str], bytes]:
    store = MemoryStore(root)
    try:
        state = {f: (rec[1], rec[2]) for f, rec in store._folder.catalog.state.items()}
        problems = sorted(f"{p.file}: {p.reason}" for p in store.problems())
        return state, problems, store.index_path.read_bytes()
    finally:
        store.close()


def _same_open(tmp: Path, child_fails: bool) -> None:
    _hand_written(tmp / "serial")
    _hand_written(tmp / "forked")
    can_fork = forked.can_fork
    forked.can_fork = lambda: False
    serial = _opened(tmp / "serial")
    forked.can_fork = can_fork
    children: list[forked.Child | None] = []
    start = forked.start

    def counted(work: Callable[[], Any]) -> forked.Child | None:
        children.append(start(work))
        return children[-1]

    def killed(*args: Any) -> None:
        os._exit(3)  # (a child killed mid-work)

    forked.start = counted
    index.FORK_AT = 10
    if child_fails:
        memfile.fields_of = killed  # type: ignore[assignment]
    got = _opened(tmp / "forked")
    assert len(children) == 1 and children[0] is not None  # a child was started
    assert children[0].status == (3 if child_fails else 0)
    assert got == serial  # the same entries, problems and MEMORY.md
    assert "note-03" in got[2].decode() and any("binary.md" in p for p in got[1])
    forked.start = start
    reopened = MemoryStore(tmp / "forked")  # from the metadata cache: nothing parsed again
    assert not children[1:] and len(reopened.entries()) == 41  # (three unreadable, one twin)
    reopened.close()


def test_a_forked_copy_parsing_half_the_files_opens_the_same_store(tmp_path: Path) -> None:
    """Very many never-seen files: a forked copy parses half; the catalogue, the problems and
    MEMORY.md are those of parsing them all in one process, and the next open trusts them."""
    fresh(_same_open, tmp_path, False)


def test_a_forked_copy_that_fails_leaves_its_half_to_this_process(tmp_path: Path) -> None:
    fresh(_same_open, tmp_path, True)


def _edited_by_hand(root: Path) -> None:
    (root / "note-05.md").write_text(
        "---\nname: note-05\ntype: project_fact\ndescription: edited by hand\n---\nnew\n"
    )
    (root / "note-06.md").unlink()
    (root / "added.md").write_text("---\nname: added\ntype: project_fact\ndescription: new\n---\n")
    (root / "link.md").symlink_to(root / "note-07.md")
    os.utime(root / "note-05.md", (1_700_000_000, 1_700_000_000))  # (old enough to trust)
    os.utime(root / "added.md", (1_700_000_000, 1_700_000_000))


def _listed_meanwhile(tmp: Path, child_fails: bool) -> None:
    from memdir import metacache

    for name in ("serial", "forked"):
        _hand_written(tmp / name)
        for path in (tmp / name).iterdir():  # (as old as a person's files: not racy)
            os.utime(path, (1_600_000_000, 1_600_000_000))
        MemoryStore(tmp / name).close()  # the metadata cache written
        assert (state_dir(tmp / name) / "meta.log").exists()
        _edited_by_hand(tmp / name)
    can_fork = forked.can_fork
    forked.can_fork = lambda: False
    serial = _opened(tmp / "serial")
    forked.can_fork = can_fork
    children: list[forked.Child | None] = []
    start = forked.start

    def counted(work: Callable[[], Any]) -> forked.Child | None:
        children.append(start(work))
        return children[-1]

    parent, listing = os.getpid(), index.scan

    def killed(root: str) -> Any:
        if os.getpid() != parent:
            os._exit(4)  # (a child killed mid-listing)
        return listing(root)

    forked.start = counted
    metacache.OVERLAP_BYTES = 1  # (any snapshot is worth listing beside)
    if child_fails:
        index.scan = killed  # type: ignore[assignment]
    got = _opened(tmp / "forked")
    assert len(children) == 1 and children[0] is not None, children  # a child listed the folder
    assert children[0].status == (4 if child_fails else 0)
    assert got == serial  # the hand edits seen alike: the same entries, problems, MEMORY.md
    text = got[2].decode()
    assert "edited by hand" in text and "added" in text and "note-06" not in text
    assert any("link.md" in p and "symbolic link" in p for p in got[1])


def test_a_forked_copy_lists_the_folder_while_the_metadata_cache_loads(tmp_path: Path) -> None:
    """A store seen before: a copy lists the folder (one lstat a file) while this process
    reads the metadata cache; what changed by hand since is found as when one process does
    both."""
    fresh(_listed_meanwhile, tmp_path, False)


def test_a_failed_listing_copy_leaves_the_listing_to_this_process(tmp_path: Path) -> None:
    fresh(_listed_meanwhile, tmp_path, True)


def _handlers_left_behind() -> None:
    import signal

    ran = []
    signal.signal(signal.SIGTERM, lambda *a: ran.append("parent's clean-up"))
    started = os.pipe()

    def wait() -> None:
        os.write(started[1], b"x")
        while True:
            pass

    child = forked.start(wait)
    assert child is not None
    assert os.read(started[0], 1) == b"x"
    os.kill(child.pid, signal.SIGTERM)  # (the child's handler is the default one: it ends)
    assert child.result() is None and child.status == -signal.SIGTERM
    assert ran == []  # and the parent's own handler ran in neither process


def test_a_signal_ends_the_child_without_the_parents_handler() -> None:
    fresh(_handlers_left_behind)
