"""``python -m lab.planner``."""

from lab.planner.cli import main

main()
