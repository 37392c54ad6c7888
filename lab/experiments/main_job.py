"""The main job (``python -m ralp.bench`` with no arguments) as it was recorded on shared CPUs
before budgets existed, with the defaults of the time (vgg11 and resnet50, then vgg11 and
googlenet), and two interleaved before/after runs of start-up changes. The defaults have
moved on, so these records cannot be made again; today's main job is bench-headline.
plan-validation still reads two of them."""

from lab.registry import Lab, Step

SUMMARY = "the main job's earlier records on shared CPUs, and two start-up A/B runs"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
