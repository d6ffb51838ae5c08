"""Starting a ``memdir`` command of this installation as a process of its own, detached.

The background embedder, the hooks' learn worker and automatic sync run this way: a new
session, no terminal, nothing read or printed, so the caller (a host's hook) never waits.
This module does NOT know what the commands do.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


def start_memdir(args: Sequence[str], *, cwd: Path | None = None) -> None:
    """Start ``python -m memdir ARGS`` detached; OSError when it cannot be started."""
    subprocess.Popen(
        [sys.executable, "-m", "memdir", *args],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=None if cwd is None else str(cwd),
    )
