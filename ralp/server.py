"""Entry point of ``python -m ralp.server`` (the code lives in :mod:`ralp.cluster.task_server`)."""

import sys

from ralp.cluster.task_server import main

if __name__ == "__main__":
    sys.exit(main())
