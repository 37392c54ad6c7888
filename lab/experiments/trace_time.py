"""How long the allreduce modes' steps took to trace, before and after each gradient's sum
started as the backward pass produces it: googlenet and inception3, modes horovod, stanza and
collective, two commits' files in interleaved rounds. Its tool wrapped the rank runtimes'
private step builders to time tracing apart from the first call; the package's wall lets the
lab use only public names, so the tool was deleted."""

from lab.registry import Lab, Step

SUMMARY = "tracing time of the allreduce modes' steps, before and after per-gradient sums"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
