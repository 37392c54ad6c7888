"""Entry point of ``python -m ralp.plan``, the short name of ``python -m ralp.planner`` (the
code lives in :mod:`ralp.planner.cli`)."""

import sys

from ralp.planner.cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m ralp.plan"))
