"""Entry point of ``python -m ralp.server`` (the code lives in :mod:`ralp.cluster.server`)."""

import sys

from ralp.cluster.server import main

if __name__ == "__main__":
    sys.exit(main())
