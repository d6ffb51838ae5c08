"""The change tracker: the operation log names memdir's writes, the folder's time a listing,
the watcher files edited in place."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest

from memdir import MemoryStore
from memdir.disk.layout import JOURNALS
from memdir.disk.watch import Tracker


def wait_for(check: Callable[[], bool]) -> bool:
    for _ in range(300):  # the watcher's events arrive on its own thread
        if check():
            return True
        time.sleep(0.05)
    return False


def tracker(store: MemoryStore, watch: bool) -> Tracker:
    journals = [store.internal / n for n in JOURNALS]
    t = Tracker(store.root, store.internal / "log.jsonl", journals, watch=watch)
    t.mark()
    return t


def test_another_process_write_is_named_by_the_log(store: MemoryStore) -> None:
    """Another process's write is named by the log."""
    t = tracker(store, watch=False)
    other = MemoryStore(store.root)  # another writer
    other.write("tabs", type="user_preference", description="Tabs", body="x")
    changes = t.poll()
    assert changes.logged == {"tabs.md"} and not changes.full and not changes.names
    assert not t.poll()  # nothing new since


def test_a_file_added_by_hand_changes_the_folder_time(store: MemoryStore) -> None:
    """A file added by hand changes the folder time."""
    t = tracker(store, watch=False)
    time.sleep(0.01)
    (store.root / "by-hand.md").write_text("---\nname: by-hand\ntype: t\ndescription: d\n---\n")
    assert t.poll().names


def test_a_replaced_log_means_look_at_everything(store: MemoryStore) -> None:
    """A replaced log means every file is looked at again."""
    store.write("tabs", type="user_preference", description="Tabs", body="x")
    t = tracker(store, watch=False)
    log = store.internal / "log.jsonl"
    log.write_text("")  # cut
    assert t.poll().full


def test_the_watcher_names_a_file_edited_in_place(store: MemoryStore) -> None:
    """The watcher names a file edited in place."""
    store.write("tabs", type="user_preference", description="Tabs", body="x")
    t = tracker(store, watch=True)
    try:
        assert t.watching
        path = store.root / "tabs.md"
        with open(path, "a") as fh:  # in place: the folder's time does not move
            fh.write("more\n")
        seen: set[str] = set()
        assert wait_for(lambda: bool(seen.update(t.poll().files) or "tabs.md" in seen))
    finally:
        t.close()
    assert not t.watching


def test_what_get_read_is_what_the_catalogue_says_next(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file edited in place that the watcher has not reported yet (here: no watcher, and no
    sweep due for an hour): once ``get`` has read the new text, the catalogue (``entries``, the
    index a host reads) says it too, not the description from before the edit."""
    import memdir.disk.watch

    def no_watcher(root: object) -> None:
        raise OSError("no inotify here")

    monkeypatch.setattr(memdir.disk.watch, "_Watcher", no_watcher)
    monkeypatch.setattr(memdir.disk.watch, "SWEEP_EVERY", 3600.0)
    store.write("db", type="project_fact", description="Staging runs Postgres 16", body="16")
    path = store.root / "db.md"
    os.utime(path, ns=(time.time_ns() - 60 * 10**9,) * 2)  # written a minute ago
    reader = MemoryStore(store.root, watch=True)
    assert [e.description for e in reader.entries()] == ["Staging runs Postgres 16"]
    inode = path.stat().st_ino
    path.write_text(path.read_text().replace("Postgres 16", "Postgres 18").replace("\n16", "\nx"))
    assert path.stat().st_ino == inode  # in place: the folder's time does not change
    assert [e.description for e in reader.entries()] == ["Staging runs Postgres 16"]  # unseen
    assert reader.get("db").description == "Staging runs Postgres 18"
    assert [e.description for e in reader.entries()] == ["Staging runs Postgres 18"]
    assert [h.name for h in reader.search("Postgres 18")] == ["db"]
