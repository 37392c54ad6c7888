"""Several PS-mode workers' layer pipelines simulated at once as a fluid, links shared fairly
or first come first served: would they run in step or staggered? The real workers went the
other way from either sharing, so the simulation led nowhere and was deleted."""

from lab.registry import Lab, Step

SUMMARY = "several PS-mode workers simulated as a fluid: in step or staggered?"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
