"""The simulated cluster in the reference device's time: alexnet at 75 px, N = 4, 1 Gbit/s,
four modes, the devices at 0.425 CPU beside 0.25 CPU (a slower host) in one interleaved run;
with the links dilated by each budget's measured pace, and, as the control, without."""

from lab.experiments._common import SMALL, bench, netns
from lab.registry import Lab, Step

SUMMARY = "ratios at 0.425 and 0.25 CPU per device, links dilated by the pace and not"
NEEDS = ("root", "horovod")
SETTINGS = {"dilated": "links dilated by each budget's pace (--dilation auto)",
            "off": "the control: links as given, figures in the host's time"}

MODES = ("--modes", "ps", "ralp-n", "horovod", "stanza", "--devices", "4")


def steps(lab: Lab) -> list[Step]:
    setting = lab.setting or "dilated"
    stem = "alexnet_1gbit" if setting == "dilated" else "alexnet_1gbit_off"
    dilation = ("--dilation", "auto" if setting == "dilated" else "off")
    return [bench(lab, *netns("1gbit"), "--models", "alexnet", *SMALL, *MODES, "--steps", "20",
                  "--device-cpus", "0.425", "0.25", *dilation, "--repeat", "1", "--quiet",
                  "--out", lab.path(f"{stem}.json"), may_fail=True)]
