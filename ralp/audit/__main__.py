"""``python -m ralp.audit`` (the code lives in :mod:`ralp.audit.cli`)."""

from ralp.audit.cli import main

main()
