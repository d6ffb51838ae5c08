"""The change tracker: the operation log names memdir's writes, the folder's time a listing,
the watcher files edited in place."""

from __future__ import annotations

import time
from collections.abc import Callable

from memdir import MemoryStore
from memdir.layout import JOURNALS
from memdir.watch import Tracker


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
