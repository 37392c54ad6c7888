"""How long the allreduce modes' steps take to trace, before and after each gradient's sum
started as the backward pass produces it (one Horovod allreduce per gradient; the collective
mode's buckets): googlenet and inception3 (116 and 190 trainable variables), modes horovod,
stanza and collective, interleaved rounds (lab/tools/trace_time.py, each commit's files apart).
Shared CPUs: the host's other load is beside the figures."""

from lab.registry import Lab, Step

SUMMARY = "tracing time of the allreduce modes' steps, before and after per-gradient sums"
NEEDS = ("horovod",)

BEFORE, AFTER = "960655d", "5f674f5"


def steps(lab: Lab) -> list[Step]:
    out = lab.path("trace_time.jsonl")
    return [Step(("rm", "-f", out)),
            Step((lab.python, "-m", "lab.tools.trace_time", "--commits", BEFORE, AFTER,
                  "--rounds", "2", "--models", "googlenet", "inception3", "--out", out)),
            Step((lab.python, "-m", "lab.tools.trace_time", "--summary", out),
                 stdout=lab.path("trace_time.txt"))]
