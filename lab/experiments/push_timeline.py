"""The PS modes, the same audit as the allreduce modes' (reduction-timeline): from real steps'
timelines of worker 0 and PS task 0 on one clock (lab/tools/push_timeline.py), whether the
pushes (gradients to the PS) arrive while the backward pass runs, whether the forward pass
starts before the last pull arrives (with ParameterServerStrategy's own pulls, and with
ralp's per-layer pulls), and when the PS's updates start against the last push (the step
ledger's gate). One worker and one PS task (so that every update on the PS is the
traced worker's), 1 Gbit/s, unbudgeted tasks on the shared host."""

from lab.experiments._common import tool
from lab.registry import Lab, Step

SUMMARY = "PS modes: pushes against the backward pass, pulls against the forward pass"
NEEDS = ("root",)

RUNS = (("alexnet", "ps", "default"), ("alexnet", "ralp", "default"), ("vgg11", "ps", "default"),
        ("alexnet", "ps", "layer"))


def steps(lab: Lab) -> list[Step]:
    printout = lab.path("push_timeline.txt")
    return [tool(lab, "push_timeline", "--model", model, "--mode", mode, "--pulls", pulls,
                 "--workers", "1", "--ps", "1", "--bandwidth", "1gbit", "--image-size", "75",
                 "--batch-size", "8", "--out", lab.path(f"push_timeline_{model}_{mode}"
                                                        f"{'' if pulls == 'default' else '_' + pulls}.json"),
                 stdout=printout, append=k > 0)
            for k, (model, mode, pulls) in enumerate(RUNS)]
