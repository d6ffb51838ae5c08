"""What a memory says of the code, held against the working tree: the files it names (``src/
app.py``) and the symbols it names in them (``parse_config()``, `` `Session` ``). A memory
whose file is gone, whose symbol is no longer in the files it names, or whose file changed
after the memory was last written may be outdated: session start, recall and ``memdir
doctor`` say so instead of presenting it as current.

A file is looked for under the project's folder (the one that holds the store); nothing
outside it is read, and a link is not followed out of it.
This module does NOT change memories; it reads the files it is given.
"""

from __future__ import annotations

import datetime
import os
import re
from pathlib import Path

_EXT = (
    "py|pyi|js|jsx|ts|tsx|mjs|cjs|go|rs|rb|java|kt|swift|c|h|cc|cpp|hpp|cs|php|sh|toml|yaml|"
    "yml|json|cfg|ini|sql|html|css|scss|vue|svelte|lock|gradle|tf"
)
_PATH = re.compile(rf"(?<![\w/.:-])((?:[\w.-]+/)*[\w-][\w.-]*\.(?:{_EXT}))(?![\w/-])")
_SYMBOL = re.compile(r"`([A-Za-z_][\w.]{2,60})(?:\(\))?`|\b([A-Za-z_]\w{2,60})\(\)")
MAX_READ = 2 * 1024 * 1024  # a named file larger than this is not searched for symbols


def named(text: str) -> tuple[list[str], list[str]]:
    """The files (relative paths) and the symbols a memory's text names."""
    files = list(dict.fromkeys(m.group(1) for m in _PATH.finditer(text)))
    symbols = [
        (a or b).rsplit(".", 1)[-1] for a, b in _SYMBOL.findall(text) if not _PATH.fullmatch(a or b)
    ]
    return files, list(dict.fromkeys(symbols))


def outdated(text: str, updated: str | None, project: Path | None) -> str | None:
    """Why a memory with ``text``, last written at ``updated`` (ISO), may be outdated in the
    working tree at ``project``, in one line; None when what it names is there as it was (or
    it names nothing, or there is no project)."""
    if project is None:
        return None
    files, symbols = named(text)
    if not files:
        return None
    base = project.resolve()
    since = _when(updated)
    texts: list[str] = []
    changed: str | None = None
    for rel in files:
        path = (base / rel).resolve()
        if base not in path.parents:
            continue  # (a path that climbs out of the project is not looked at)
        try:
            st = path.stat()
        except OSError:
            return f"may be outdated: {rel} is gone"
        if changed is None and since is not None and st.st_mtime > since.timestamp() + 1:
            when = datetime.datetime.fromtimestamp(st.st_mtime, datetime.UTC)
            changed = f"may be outdated: {rel} changed since {_day(since)} ({_day(when)})"
        if symbols and st.st_size <= MAX_READ and os.path.isfile(path):
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
    gone = [s for s in symbols if texts and not any(s in t for t in texts)]
    if gone:
        return f"may be outdated: {gone[0]} is no longer in {', '.join(files[:2])}"
    return changed


def project_of(root: Path) -> Path | None:
    """The working tree a store's memories speak of: the folder that holds a project's
    ``.memory``; None for any other store (the user's own, a shared one)."""
    return root.parent if root.name == ".memory" else None


def _when(value: str | None) -> datetime.datetime | None:
    if not value:
        return None
    try:
        when = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=datetime.UTC)


def _day(when: datetime.datetime) -> str:
    return f"{when.day} {when:%B %Y}"
