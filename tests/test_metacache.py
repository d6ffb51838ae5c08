"""The metadata cache: rows keyed by file identity, a snapshot and an append log."""

from __future__ import annotations

import os
import time
from pathlib import Path

from memdir import MemoryStore
from memdir.memfile import entry_from
from memdir.memory import Memory
from memdir.metacache import MetaCache

TYPES = ("project_fact",)


def test_rows_survive_a_reopen_through_the_log_and_the_snapshot(tmp_path: Path) -> None:
    """Rows survive a reopen through the log and the snapshot."""
    cache = MetaCache(tmp_path / "meta.json")
    e = entry_from(Memory("a", "project_fact", "A"), "a.md", TYPES)
    cache.remember("a.md", (1, 2, 3), e, None)
    cache.remember("bad.md", (4, 5, 6), None, "no YAML frontmatter")
    cache.save()  # small: appended to meta.log
    assert (tmp_path / "meta.log").exists()
    again = MetaCache(tmp_path / "meta.json")
    assert again.files["a.md"] == ((1, 2, 3), e, None)
    assert again.files["bad.md"] == ((4, 5, 6), None, "no YAML frontmatter")
    again.forget("bad.md")
    again.save(force=True)  # folded into meta.json
    assert not (tmp_path / "meta.log").exists()
    assert set(MetaCache(tmp_path / "meta.json").files) == {"a.md"}


def test_a_torn_or_foreign_cache_is_only_slower(tmp_path: Path) -> None:
    """A torn or foreign cache is only slower."""
    (tmp_path / "meta.json").write_text('{"version": 1, "rows": [["a.md"')
    (tmp_path / "meta.log").write_text('["a.md", 1, 2\n')
    assert MetaCache(tmp_path / "meta.json").files == {}


def test_a_stale_row_is_never_trusted(store: MemoryStore) -> None:
    """A stale row is never trusted."""
    store.write("tabs", type="user_preference", description="Tabs", body="x")
    store.close()
    old = time.time() - 60  # a file changed this very second is never cached: make it older
    os.utime(store.root / "tabs.md", (old, old))
    MemoryStore(store.root).close()  # a fresh open sweeps the folder and caches every row
    # a cache that lies about the file (same name, wrong description): the identity differs
    cache = MetaCache(store.internal / "meta.json")
    key, entry, _ = cache.files["tabs.md"]
    assert entry is not None
    cache.remember(
        "tabs.md",
        (key[0], key[1] + 1, key[2]),
        entry.__class__(**{**entry.__dict__, "description": "stale"}),
        None,
    )
    cache.save(force=True)
    assert MemoryStore(store.root).entries()[0].description == "Tabs"
