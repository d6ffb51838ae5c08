"""Commands that may talk to a language model; registered on the main group.

The SDKs are imported inside the commands, never at import time of this module.
"""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add the LLM-backed commands to ``group``."""
