"""Entry point of ``python -m ralp.audit`` (the code lives in ralp.placement.audit_cli)."""

from ralp.placement.audit_cli import main

if __name__ == "__main__":
    main()
