"""Do the allreduce modes' reductions run while the backward pass does? A real step's
timeline: the bench's setting on budgeted devices (N = 4, 1 Gbit/s, image 75, batch 8) with
every rank under tf.profiler (and Horovod's own timeline in modes horovod and stanza), its
steps read by ralp/audit/overlap.py (lab/tools/reduction_timeline.py). Stanza runs 2 CONV +
2 FC ranks, so that both rings are there. Setting ``after``: this checkout; ``before``: the
commit before the reductions started during the backward pass, for comparison. The traces
are removed once read; the host is shared (its load average is beside each printout)."""

from lab.experiments._common import tool
from lab.registry import Lab, Step

SUMMARY = "the allreduce modes' reductions against the backward pass, from real steps' traces"
NEEDS = ("root", "horovod")
SETTINGS = {"after": "this checkout: alexnet and vgg11 in horovod, stanza and collective",
            "before": "the commit before (one grouped allreduce; the optimizer's one sum)"}

BEFORE = "960655d"
MODELS = ("alexnet", "vgg11")
MODES = (("horovod", ()), ("stanza", ("--fc-workers", "2")), ("collective", ()))


def steps(lab: Lab) -> list[Step]:
    side = lab.setting
    printout = lab.path(f"reduction_timeline_{side}.txt")
    out: list[Step] = []
    for model in MODELS:
        for mode, extra in MODES:
            name = f"{side}_{model}_{mode}"
            traces = lab.path(f"traces/{name}")
            commit = ("--commit", BEFORE) if side == "before" else ()
            out += [Step(("cat", "/proc/loadavg"), stdout=printout, append=bool(out)),
                    tool(lab, "reduction_timeline", "run", "--model", model, "--mode", mode,
                         "--devices", "4", "--bandwidth", "1gbit", "--image-size", "75",
                         "--batch-size", "8", "--steps", "8", "--warmup", "2", *extra,
                         "--traces", traces, *commit, stdout=printout, append=True),
                    tool(lab, "reduction_timeline", "analyse", traces, "--name", name, "--out",
                         lab.path(f"reduction_timeline_{name}.json"), stdout=printout,
                         append=True),
                    Step(("rm", "-r", traces))]
    return out
