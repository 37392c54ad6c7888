"""How much training the shared host does with several processes at once, against one alone:
processes forked from the zygote timing one window together. A one-off measurement for the
shared-CPU planner, whose calibration now measures the capacity itself; the script was
deleted."""

from lab.registry import Lab, Step

SUMMARY = "the shared host's capacity against the number of processes training"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
