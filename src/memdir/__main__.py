"""``python -m memdir`` runs the command line."""

from .cli import main

main()
