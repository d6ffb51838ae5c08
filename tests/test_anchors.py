"""Memories checked against the working tree: a memory that names a file or a symbol in it is
marked "may be outdated" at session start, in recall and by doctor once the file is gone,
changed since the memory was written, or no longer holds the symbol."""

from __future__ import annotations

import os
import time
from pathlib import Path

from memdir import MemoryStore
from memdir.code.anchors import named, outdated
from memdir.config import Config
from memdir.recall.block import render_block
from memdir.standing import standing

from conftest import CliFn


def test_what_a_memory_names_of_the_code() -> None:
    files, symbols = named(
        "Config is parsed by `load_settings()` in src/app/config.py; see https://x.io/a.py"
        " and package.json. Call refresh() after."
    )
    assert files == ["src/app/config.py", "package.json"]
    assert symbols == ["load_settings", "refresh"]
    assert outdated("nothing of the code", None, Path("/")) is None


def test_a_memory_whose_file_changed_or_went_is_marked_wherever_it_is_shown(
    tmp_path: Path, cli: CliFn
) -> None:
    project = tmp_path
    root = project / ".memory"
    store = MemoryStore(root, Config(dir=root, embedder="none"))
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("def load_settings():\n    return {}\n")
    old = time.time() - 3600
    os.utime(project / "src" / "app.py", (old, old))
    store.write("settings-rule", type="feedback", description="Settings come from one place",
                body="Always read settings through `load_settings()` in src/app.py.")  # fmt: skip
    store.write("api-fact", type="project_fact", description="The API lives in src/api.py",
                body="The HTTP API is in src/api.py.")  # fmt: skip
    text = standing(store, 2000, 200, 25_000).text
    assert "load_settings" in text and "may be outdated" not in text.split("<memory_index>")[0]
    block = render_block(store, ["api-fact"], 2000)
    assert 'outdated="may be outdated: src/api.py is gone"' in block
    (project / "src" / "app.py").write_text("def read_config():\n    return {}\n")
    text = standing(store, 2000, 200, 25_000).text
    assert "(may be outdated: load_settings is no longer in src/app.py)" in text
    r = cli("doctor")
    assert "settings-rule: may be outdated: load_settings is no longer in src/app.py" in r.out
    assert "api-fact: may be outdated: src/api.py is gone" in r.out
    (project / "src" / "app.py").write_text("def load_settings():\n    return {'a': 1}\n")
    later = time.time() + 120  # (changed a while after the memory was written)
    os.utime(project / "src" / "app.py", (later, later))
    text = standing(store, 2000, 200, 25_000).text
    assert "(may be outdated: src/app.py changed since" in text
