"""The ``memdir`` command's entry point (``python -m memdir`` too): a host's hook goes to the
resident memdir when one answers (``hookclient``: nothing of the store imported), anything
else to the command line.
This module does NOT define a command.
"""

from __future__ import annotations

import sys

from .hookclient import hook


def main() -> None:
    """Run ``memdir`` with the process's arguments."""
    if hook(sys.argv[1:]):
        return
    from .cli.main import main as cli

    cli()


if __name__ == "__main__":
    main()
