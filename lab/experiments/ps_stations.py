"""The planner's PS-mode stations (a worker's device, the busiest PS device and link) beside
what the budgeted sweep's records measured. The stations did not add up to the steps, which
led to step-timeline; the script was deleted."""

from lab.registry import Lab, Step

SUMMARY = "the PS modes' stations, predicted beside the budgeted records"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
