"""When each of plain PS's pulls arrives against the first op of the layer that needs it, for
each pull schedule: worker 0 traced while it trains (lab/tools/pull_timeline.py)."""

from lab.experiments._common import tool
from lab.registry import Lab, Step

SUMMARY = "plain PS, 2 + 2 at 1 Gbit/s: each pull's arrival against its layer's first op"
NEEDS = ("root",)

MODELS = (("vgg11", "64"), ("alexnet", "75"))


def steps(lab: Lab) -> list[Step]:
    return [tool(lab, "pull_timeline", "--model", model, "--image-size", size, "--workers", "2",
                 "--ps", "2", "--bandwidth", "1gbit", "--schedules", "default", "ibatch", "layer",
                 "--out", lab.path(f"pull_timeline_{model}_1gbit.json"),
                 "--plot", lab.path(f"pull_timeline_{model}_1gbit.png"))
            for model, size in MODELS]
