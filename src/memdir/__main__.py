"""The ``memdir`` command's entry point (``python -m memdir`` too): a host's hook goes to the
resident memdir when one answers (``hookclient``: nothing of the store imported), anything
else to the command line.
This module does NOT define a command.
"""

from __future__ import annotations

import sys

from .hookclient import hook


def main() -> None:
    """Run ``memdir`` with the process's arguments. Ctrl-C before a command has started
    (while its modules load) ends it quietly, as a shell expects (exit 130)."""
    try:
        if hook(sys.argv[1:]):
            return
        from .cli.main import main as cli
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        raise SystemExit(130) from None
    cli()


if __name__ == "__main__":
    main()
