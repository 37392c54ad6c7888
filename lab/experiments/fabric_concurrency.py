"""Do k workers' transfers at once keep a budgeted PS task's link busy, and what do they cost
its CPU? Real servers in budgeted groups, every worker pulling, pushing, or both at once. A
one-off probe of the planner's PS link and device stations; it was deleted."""

from lab.registry import Lab, Step

SUMMARY = "k workers' transfers at once through one budgeted PS's link"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
