"""Two workers on one PS task without RALP's tail there: resnet50, plain PS and RALP-H, one
worker and two on one PS task, every device at N = 4's budget, past the epoch's first cycles,
calibrated first. At 500 Mbit/s the rounds are interleaved by one bench call per shape and
round, read back as rounds; at 750 Mbit/s (the pairs only) the rule the first run led to is
tested where it was not chosen. planner-devices validates both.

"Turns": two workers take turns when one's transfers run while the other computes, so each
steps nearly as fast as one worker alone; otherwise they meet on the link and wait."""

from lab.experiments._common import SMALL, bench, gather, netns, planner
from lab.registry import Lab, Step

SUMMARY = "one and two workers on one PS task, plain PS and RALP-H: turns or not"
NEEDS = ("root",)
SETTINGS = {"500mbit": "one worker and two, 3 interleaved rounds",
            "750mbit": "two workers, 3 rounds"}

SHAPE = ("--models", "resnet50", *SMALL, "--modes", "ps", "ralp-h")
DEVICE = ("--device-cpus", "0.425", "--steps", "8", "--warmup", "10")


def calibrate(lab: Lab, rate: str, output: str) -> Step:
    return planner(lab, "--calibrate", "--model", "resnet50", "--batch-size", "8",
                   "--image-size", "75", "--device-cpus", "0.425", "--devices", "4",
                   "--transfer-rates", rate, "--output", lab.path(output))


def steps(lab: Lab) -> list[Step]:
    if lab.setting == "750mbit":
        return [calibrate(lab, "750mbit", "turns_one_ps_resnet50_750mbit_calibration.json"),
                bench(lab, *netns("750mbit"), *SHAPE, "--workers", "2", "--ps", "1", *DEVICE,
                      "--repeat", "3", "--quiet",
                      "--out", lab.path("turns_one_ps_resnet50_750mbit.json"), may_fail=True)]
    runs = [bench(lab, *netns("500mbit"), *SHAPE, "--workers", w, "--ps", "1", *DEVICE,
                  "--quiet", "--out", lab.path(f"parts/w{w}-r{r}.json"), may_fail=True)
            for r in ("1", "2", "3") for w in ("1", "2")]
    # each file is one round of its shape, read in order w1-r1 w1-r2 w1-r3 w2-r1 ...
    names = [f"w{w}-r{r}" for w in ("1", "2") for r in ("1", "2", "3")]
    return [calibrate(lab, "500mbit", "turns_one_ps_resnet50_calibration.json"), *runs,
            *gather(lab, "parts", names, "--as-rounds",
                    "--out", lab.path("turns_one_ps_resnet50_500mbit.json"))]
