"""Entry point of ``python -m ralp.profile`` (the code lives in ralp.profiler.cli).

``ralp.profile`` the *function* is the profiler API; ``python -m`` runs this file as
``__main__`` without importing it as ``ralp.profile``, so the two do not collide.
"""

from ralp.profiler.cli import main

if __name__ == "__main__":
    main()
