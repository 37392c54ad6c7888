"""The simulated cluster in the reference device's time: N = 4, 1 Gbit/s, four modes, the
devices at 0.425 CPU beside 0.25 CPU (a slower host) in one interleaved run; alexnet with the
links dilated by each budget's measured pace and, as the control, without; vgg11 dilated; and
the README's main job itself (its defaults), in three interleaved rounds."""

from lab.experiments._common import SMALL, bench, netns
from lab.registry import Lab, Step

SUMMARY = "ratios at 0.425 and 0.25 CPU per device, links dilated by the pace and not"
NEEDS = ("root", "horovod")
SETTINGS = {"dilated": "alexnet, links dilated by each budget's pace (--dilation auto)",
            "off": "the control: alexnet, links as given, figures in the host's time",
            "vgg11": "vgg11, links dilated by each budget's pace",
            "main-job": "the main job as the README runs it, at both budgets, 3 rounds"}

MODES = ("--modes", "ps", "ralp-n", "horovod", "stanza", "--devices", "4")
RUNS = {"dilated": ("alexnet", "auto", "alexnet_1gbit"),
        "off": ("alexnet", "off", "alexnet_1gbit_off"),
        "vgg11": ("vgg11", "auto", "vgg11_1gbit")}


def steps(lab: Lab) -> list[Step]:
    if lab.setting == "main-job":
        return [bench(lab, "--device-cpus", "0.425", "0.25", "--repeat", "3", "--quiet",
                      "--out", lab.path("main_job.json"), may_fail=True)]
    model, dilation, stem = RUNS[lab.setting or "dilated"]
    return [bench(lab, *netns("1gbit"), "--models", model, *SMALL, *MODES, "--steps", "20",
                  "--device-cpus", "0.425", "0.25", "--dilation", dilation, "--repeat", "1",
                  "--quiet", "--out", lab.path(f"{stem}.json"), may_fail=True)]
