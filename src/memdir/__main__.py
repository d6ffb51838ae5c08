"""``python -m memdir`` runs the command line (a host's hook through the resident memdir
when one answers)."""

from .launch import main

main()
