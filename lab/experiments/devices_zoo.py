"""The zoo on simulated devices: five models at 75 px, every mode, 3 interleaved rounds, 6
measured steps per worker after one warm-up step (each run an epoch of its own). Budgeted
settings calibrate each workload inside one device's budget first (the records carry it, and
planner-devices validates them); shared settings run the same on the host's shared CPUs, to
set beside them; one setting runs plain PS and RALP-N on one cluster shape (3 + 1)."""

from lab.experiments._common import SMALL, ZOO, bench, netns, outputs
from lab.registry import Lab, Step

SUMMARY = "five models, every mode, N = 4 and 8, 1 Gbit/s and 500 Mbit/s, budgeted and shared"
NEEDS = ("root", "horovod")
SETTINGS = {
    "n4-1gbit": "N = 4, 1 Gbit/s, budgeted and calibrated",
    "n4-1gbit-again": "the same on another day, calibrated with every term of the planner",
    "n8-1gbit": "N = 8, 1 Gbit/s, budgeted and calibrated",
    "n4-500mbit": "N = 4, 500 Mbit/s, budgeted and calibrated",
    "n8-500mbit": "N = 8, 500 Mbit/s, budgeted and calibrated",
    "n4-1gbit-one-ps": "plain PS and RALP-N on 3 workers + 1 PS, N = 4, 1 Gbit/s, calibrated",
    "n4-1gbit-shared": "resnet50 and inception3 at N = 4, 1 Gbit/s, shared CPUs",
    "n4-1gbit-shared-fc": "vgg11, alexnet and overfeat at N = 4, 1 Gbit/s, shared CPUs",
    "n8-1gbit-shared": "N = 8, 1 Gbit/s, shared CPUs",
    "n4-500mbit-shared": "N = 4, 500 Mbit/s, shared CPUs",
    "n8-500mbit-shared": "N = 8, 500 Mbit/s, shared CPUs",
    "n8-500mbit-shared-again": "vgg11, overfeat and inception3 at N = 8, 500 Mbit/s, shared",
}
EVERY_MODE = ("--modes", "ps", "ralp-h", "ralp-n", "horovod", "stanza")
WINDOW = ("--steps", "6", "--warmup", "1", "--repeat", "3")
# what each setting runs beyond its link rate and N: models, modes and the devices' CPUs
RUNS = {
    "n4-1gbit": (ZOO, EVERY_MODE, ("--calibrate",)),
    "n4-1gbit-again": (ZOO, EVERY_MODE, ("--calibrate",)),
    "n8-1gbit": (ZOO, EVERY_MODE, ("--calibrate",)),
    "n4-500mbit": (ZOO, EVERY_MODE, ("--calibrate",)),
    "n8-500mbit": (ZOO, EVERY_MODE, ("--calibrate",)),
    "n4-1gbit-one-ps": (ZOO, ("--modes", "ps", "ralp-n", "--workers", "3", "--ps", "1"),
                        ("--calibrate",)),
    "n4-1gbit-shared": (("resnet50", "inception3"), EVERY_MODE, ("--device-cpus", "shared")),
    "n4-1gbit-shared-fc": (("vgg11", "alexnet", "overfeat"), EVERY_MODE,
                           ("--device-cpus", "shared")),
    "n8-1gbit-shared": (ZOO, EVERY_MODE, ("--device-cpus", "shared")),
    "n4-500mbit-shared": (ZOO, EVERY_MODE, ("--device-cpus", "shared")),
    "n8-500mbit-shared": (ZOO, EVERY_MODE, ("--device-cpus", "shared")),
    "n8-500mbit-shared-again": (("vgg11", "overfeat", "inception3"), EVERY_MODE,
                                ("--device-cpus", "shared")),
}


def stem(setting: str) -> str:
    """The records' file name: N = 4 is left out of it."""
    return "devices_zoo_" + setting.removeprefix("n4-").replace("-", "_")


def steps(lab: Lab) -> list[Step]:
    devices, rate = lab.setting.split("-")[:2]
    models, modes, cpus = RUNS[lab.setting]
    return [bench(lab, *netns(rate), "--models", *models, *SMALL, *modes,
                  "--devices", devices.removeprefix("n"), *WINDOW, *cpus, "--quiet",
                  *outputs(lab, stem(lab.setting)), may_fail=True)]
