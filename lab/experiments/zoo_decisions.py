"""The profiler's decision for every zoo model at its default size: the skewness S, which
layers move to the PS and the byte model's bytes per step, as a table and as CSV."""

from lab.registry import Lab, Step

SUMMARY = "the profiler's skewness and split for every zoo model"
NEEDS = ()


def steps(lab: Lab) -> list[Step]:
    profiler = (lab.python, "-m", "ralp.profiler", "--all")
    return [Step(profiler, stdout=lab.path("zoo_decisions.txt")),
            Step((*profiler, "--format", "csv"), stdout=lab.path("zoo_decisions.csv"))]
