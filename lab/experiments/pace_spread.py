"""Does the host's pace (the work one CPU-second buys, which every budgeted record carries)
explain how far a setting's rounds lie apart? A reading of devices-repeat's records: each
round's deviation beside its pace's, their correlation, and the spread left after dividing
by the pace. It explained much of the spread but no budget can hold it; the script that
read it was deleted."""

from lab.registry import Lab, Step

SUMMARY = "does the host's pace explain how far a setting's rounds lie apart?"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
