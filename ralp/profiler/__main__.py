"""``python -m ralp.profiler`` (the code lives in :mod:`ralp.profiler.cli`)."""

from ralp.profiler.cli import main

main()
