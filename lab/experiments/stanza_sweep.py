"""Stanza's layer separation (one FC rank) beside plain PS, RALP-N and Horovod on five models
at 75 px, N = 4 and 8. One bench call per model, so that other work can take the machine
between them; the parts are then read back as one file. Shared CPUs, as recorded."""

from lab.experiments._common import SMALL, ZOO, bench, gather, netns, outputs
from lab.registry import Lab, Step

SUMMARY = "Stanza beside plain PS, RALP-N and Horovod, five models, N = 4 and 8 (shared CPUs)"
NEEDS = ("root", "horovod")
SETTINGS = {"1gbit": "every link at 1 Gbit/s", "10gbit": "every link at 10 Gbit/s"}


def steps(lab: Lab) -> list[Step]:
    rate = lab.setting
    parts = f"parts-{rate}"
    runs = [bench(lab, *netns(rate), "--models", model, *SMALL, "--modes", "ps", "ralp-n",
                  "horovod", "stanza", "--devices", "4", "8", "--steps", "3", "--device-cpus",
                  "shared", "--quiet", "--out", lab.path(f"{parts}/{model}.json"), may_fail=True)
            for model in ZOO]
    return runs + gather(lab, parts, list(ZOO), *outputs(lab, f"bench_stanza_{rate}"))
