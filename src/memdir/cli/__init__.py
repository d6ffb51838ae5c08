"""The ``memdir`` command line.

- ``main``: the group, its global options, the commands that write (init, add, mv, pin, edit,
  rm), and the one place errors are rendered.
- ``context``: what every command gets (configuration resolved once, the store found like git
  finds ``.git``, ``--scope``, ``NAME@vN``, ``--json``, one-line failures).
- ``read``, ``versions``, ``upkeep``, ``llm``, ``agent``, ``hooks``, ``trust``, ``sync``,
  ``review``, ``ui``, ``tokens``: the other commands, by what they are about.

This package owns parsing and printing; it does NOT hold rules of its own (those live in the
modules the commands call).
"""

from .main import cli, hoist_global_options, main

__all__ = ["cli", "hoist_global_options", "main"]
