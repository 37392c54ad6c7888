"""Repeatability on simulated devices: alexnet and vgg11 at 75 px, N = 4, four modes in
interleaved rounds (each round the whole matrix, the order rotated). Budgeted devices beside
shared CPUs at 1 and 10 Gbit/s; at 10 Gbit/s also budgets held to a constant compute pace,
and windows three times as long."""

from lab.experiments._common import SMALL, bench, netns, outputs, tool
from lab.registry import Lab, Step

SUMMARY = "the spread of interleaved rounds: budgets beside shared CPUs, paced, long windows"
NEEDS = ("root", "horovod")
SETTINGS = {"1gbit": "budgeted and shared, 20 steps per worker, 5 rounds",
            "10gbit": "budgeted and shared, 20 steps per worker, 5 rounds",
            "10gbit-paced": "the plain budget beside the paced one, 5 rounds",
            "10gbit-long": "the plain budget, 60 steps per worker, each model a run of 5 rounds"}

MODES = ("--modes", "ps", "ralp-n", "horovod", "stanza", "--devices", "4")


def steps(lab: Lab) -> list[Step]:
    if lab.setting == "10gbit-long":
        stems = ("devices_repeat_10gbit_long", "devices_repeat_10gbit_long_vgg11")
        runs = [bench(lab, *netns("10gbit"), "--models", model, *SMALL, *MODES, "--steps", "60",
                      "--repeat", "5", "--quiet", *outputs(lab, stem), may_fail=True,
                      paced=True)
                for model, stem in zip(("alexnet", "vgg11"), stems, strict=True)]
    else:
        rate, _, paced = lab.setting.partition("-")
        cpus = ("auto", "paced") if paced else ("auto", "shared")
        stems = (f"devices_repeat_{lab.setting.replace('-', '_')}",)
        runs = [bench(lab, *netns(rate), "--models", "alexnet", "vgg11", *SMALL, *MODES,
                      "--steps", "20", "--device-cpus", *cpus, "--repeat", "5", "--quiet",
                      *outputs(lab, stems[0]), may_fail=True, paced=True)]
    # how far the host's pace moved between the rounds, beside the records
    spread = tool(lab, "pace_spread", *(lab.path(f"{s}.json") for s in stems),
                  stdout=lab.path(f"{stems[0]}_pace.txt"))
    return [*runs, spread]
