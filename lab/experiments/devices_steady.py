"""The PS modes on budgeted devices past the epoch's first cycles (16 warm-up steps per
worker, 12 measured; one worker alone after 8 and 8), 3 interleaved rounds, each calibrated
beside its runs: the windows the planner's default step model is validated on
(planner-devices). The ``-dilated`` settings run N = 4's again as the bench now does by
default, in the reference device's time (links scaled to the host's pace)."""

from lab.experiments._common import SMALL, bench, netns, outputs
from lab.registry import Lab, Step

SUMMARY = "the PS modes past the epoch's first cycles on budgeted devices, calibrated"
NEEDS = ("root",)
SETTINGS = {"n4-1gbit": "vgg11, resnet50, inception3; N = 4, 1 Gbit/s",
            "n4-1gbit-rest": "alexnet and overfeat, the same",
            "n2-alone-1gbit": "one worker and one PS task at N = 4's budget, 1 Gbit/s",
            "n8-500mbit": "resnet50, plain PS and RALP-N, N = 8, 500 Mbit/s",
            "n4-500mbit": "resnet50 and overfeat, N = 4, 500 Mbit/s",
            "n8-500mbit-inception3": "inception3, N = 8, 500 Mbit/s",
            "n4-1gbit-dilated": "n4-1gbit again, in the reference device's time",
            "n4-1gbit-rest-dilated": "n4-1gbit-rest again, in the reference device's time"}

PS_MODES = ("ps", "ralp-h", "ralp-n")
PAST = ("--steps", "12", "--warmup", "16")
# the records' file, the link rate, models, modes, and devices with the window
RUNS = {"n4-1gbit": ("devices_n4_1gbit_steady", "1gbit", ("vgg11", "resnet50", "inception3"),
                     PS_MODES, ("--devices", "4", *PAST)),
        "n4-1gbit-rest": ("devices_n4_1gbit_steady_rest", "1gbit", ("alexnet", "overfeat"),
                          PS_MODES, ("--devices", "4", *PAST)),
        "n2-alone-1gbit": ("devices_n2_alone_1gbit", "1gbit", ("vgg11", "resnet50"),
                           ("ps", "ralp-n"), ("--devices", "2", "--device-cpus", "0.425",
                                              "--steps", "8", "--warmup", "8")),
        "n8-500mbit": ("devices_n8_500mbit_steady", "500mbit", ("resnet50",), ("ps", "ralp-n"),
                       ("--devices", "8", *PAST)),
        "n4-500mbit": ("devices_n4_500mbit_steady", "500mbit", ("resnet50", "overfeat"),
                       PS_MODES, ("--devices", "4", *PAST)),
        "n8-500mbit-inception3": ("devices_n8_500mbit_inception3_steady", "500mbit",
                                  ("inception3",), PS_MODES, ("--devices", "8", *PAST))}

for _setting in ("n4-1gbit", "n4-1gbit-rest"):
    _stem, *_rest = RUNS[_setting]
    RUNS[f"{_setting}-dilated"] = (f"{_stem}_dilated", *_rest)


def steps(lab: Lab) -> list[Step]:
    stem, rate, models, modes, shape = RUNS[lab.setting]
    plot = lab.setting != "n2-alone-1gbit"  # that record was made without a picture
    return [bench(lab, *netns(rate), "--models", *models, *SMALL, "--modes", *modes, *shape,
                  "--repeat", "3", "--calibrate", "--quiet", *outputs(lab, stem, plot=plot),
                  may_fail=True)]
