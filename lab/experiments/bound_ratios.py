"""Every mode's step against its bound: alexnet, vgg11 and resnet50 at 75 px, batch 8, N = 4
budgeted devices, every mode, at 1 and 10 Gbit/s; each record's ``bound_ratio`` = step /
max(compute in the device's budget, the busiest link direction's wire time). Setting ``sides``
runs nothing: the records of both rates read again with the busiest device's CPU as a third
side of the bound (lab/tools/bound_sides.py; the bench records it since), and each step against
its busiest link used in turns; setting ``reference-sides`` reads the reference table's records
(3 rounds) the same way. Setting ``long-warmup``: plain PS on alexnet at 1 Gbit/s after 2 and
after 20 warm-up steps per worker, 2 interleaved rounds: whether its workers, which start an
epoch in step, leave it later."""

from lab.experiments._common import SMALL, bench, netns, outputs
from lab.registry import Lab, Step

SUMMARY = "each mode's step over its bound (compute, or the busiest link's wire time)"
NEEDS = ("root", "horovod")
SETTINGS = {"1gbit": "links at 1 Gbit/s", "10gbit": "links at 10 Gbit/s",
            "sides": "no run: both rates' records with the busiest device's CPU as a side",
            "reference-sides": "no run: the reference table's records read as by sides",
            "long-warmup": "plain PS, alexnet, 1 Gbit/s: 2 and 20 warm-up steps, 2 rounds"}

MODES = ("--modes", "ps", "ralp-n", "horovod", "stanza", "collective", "--devices", "4")


def steps(lab: Lab) -> list[Step]:
    if lab.setting == "reference-sides":
        records = [lab.of("reference-table", f"reference_table_{rate}.json")
                   for rate in ("1gbit", "10gbit")]
        return [Step((lab.python, "-m", "lab.tools.bound_sides", *records),
                     stdout=lab.path("bound_sides_reference.txt"))]
    if lab.setting == "long-warmup":
        return long_warmup(lab)
    if lab.setting == "sides":
        records = [lab.path(f"bound_ratios_{rate}.json") for rate in ("1gbit", "10gbit")]
        return [Step((lab.python, "-m", "lab.tools.bound_sides", *records),
                     stdout=lab.path("bound_sides.txt"))]
    rate = lab.setting or "1gbit"
    return [bench(lab, *netns(rate), "--models", "alexnet", "vgg11", "resnet50", *SMALL, *MODES,
                  "--steps", "10", "--repeat", "1", "--quiet",
                  *outputs(lab, f"bound_ratios_{rate}"), may_fail=True)]


def long_warmup(lab: Lab) -> list[Step]:
    """Plain PS's turns after a short and a long warm-up, interleaved, then read by
    bound_sides (one line per warm-up)."""
    runs, files = [], []
    for round_ in (1, 2):
        for warmup in ("2", "20"):
            stem = f"long_warmup/ps_alexnet_warmup{warmup}_round{round_}"
            files.append(lab.path(f"{stem}.json"))
            runs.append(bench(lab, *netns("1gbit"), "--models", "alexnet", *SMALL, "--modes",
                              "ps", "--devices", "4", "--steps", "20", "--warmup", warmup,
                              "--quiet", *outputs(lab, stem, plot=False)))
    return [*runs, Step((lab.python, "-m", "lab.tools.bound_sides", *files),
                        stdout=lab.path("bound_sides_long_warmup.txt"))]
