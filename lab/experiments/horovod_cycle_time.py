"""Does Horovod's default cycle time, whose polling uses an idle rank's CPU, cost its figures
on budgeted devices? The main job's workloads in mode horovod at two cycle times,
interleaved. Nothing said it did, so the bench keeps Horovod's default."""

from lab.registry import Lab, Step

SUMMARY = "does Horovod's polling cost its figures on budgeted devices? (no)"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
