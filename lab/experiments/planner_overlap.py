"""The planner's overlap term and the allreduce modes' step with it. Setting ``share``: the
share of the backward pass that gradient transfers can hide behind, from the reductions'
measured timelines (reduction-timeline, this checkout's runtime; lab/tools/overlap_share.py),
nothing runs. Setting ``n4-1gbit``: alexnet and vgg11 in horovod, stanza and collective on
budgeted devices (N = 4, 1 Gbit/s), calibrated beside the runs, with this checkout's runtime
(every reduction started as the backward pass produces its gradient), then the planner
against them. The planner against the records made before the overlap: planner-devices and
plan-validation."""

from lab.experiments._common import SMALL, bench, netns, tool, validate
from lab.registry import Lab, Step

SUMMARY = "the overlap term from measured timelines; the rings' steps with it (budgeted devices)"
NEEDS = ("root", "horovod")
SETTINGS = {"share": "the overlap term from reduction-timeline's traces (no run)",
            "n4-1gbit": "alexnet and vgg11, horovod, stanza, collective, N = 4, 1 Gbit/s"}

TIMELINES = ("alexnet_horovod", "alexnet_stanza", "alexnet_collective", "vgg11_horovod",
             "vgg11_stanza", "vgg11_collective")


def steps(lab: Lab) -> list[Step]:
    if lab.setting == "share":
        def timeline(name: str) -> str:
            return lab.of("reduction-timeline", f"reduction_timeline_after_{name}.json")

        horovod = [timeline(name) for name in TIMELINES if not name.endswith("collective")]
        collective = [timeline(name) for name in TIMELINES if name.endswith("collective")]
        return [tool(lab, "overlap_share", *horovod, "--at-hand-over", *collective, "--out",
                     lab.path("overlap_share.json"), stdout=lab.path("overlap_share.txt"))]
    record = lab.path("overlap_n4_1gbit.json")
    return [bench(lab, *netns("1gbit"), "--models", "alexnet", "vgg11", *SMALL, "--modes",
                  "horovod", "stanza", "collective", "--devices", "4", "--steps", "6",
                  "--warmup", "1", "--repeat", "2", "--calibrate", "--quiet", "--out", record),
            validate(lab, record, "--step-model", "in-step",
                     stdout=lab.path("overlap_n4_1gbit_validation.txt"))]
