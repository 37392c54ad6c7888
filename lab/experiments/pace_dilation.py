"""The simulated cluster in the reference device's time: N = 4, 1 Gbit/s, four modes, the
devices at 0.425 CPU beside 0.25 CPU (a slower host) in one interleaved run; alexnet with the
links dilated by each budget's measured pace and, as the control, without; vgg11 dilated; and
the README's main job itself (its defaults), in three interleaved rounds. ``busier``: alexnet
and vgg11 on a quiet, a slower, a busier and an overloaded host (a CPU-bound load beside the
run, held to what the budgets leave, or not held), one bench call per host and round, the
hosts' order rotated each round."""

from lab.experiments._common import SMALL, bench, netns, tool
from lab.registry import Lab, Step

SUMMARY = "ratios at 0.425 and 0.25 CPU per device, links dilated by the pace and not"
NEEDS = ("root", "horovod")
SETTINGS = {"dilated": "alexnet, links dilated by each budget's pace (--dilation auto)",
            "off": "the control: alexnet, links as given, figures in the host's time",
            "vgg11": "vgg11, links dilated by each budget's pace",
            "main-job": "the main job as the README runs it, at both budgets, 3 rounds",
            "busier": "alexnet and vgg11 on a quiet, slower and busier host, 2 rounds, and "
                      "an overloaded one, 1 round",
            "probe-contention": "the pace probe alone and on 4 devices of 0.25 CPU at once, "
                                "on a quiet and on the busier host"}

MODES = ("--modes", "ps", "ralp-n", "horovod", "stanza", "--devices", "4")
RUNS = {"dilated": ("alexnet", "auto", "alexnet_1gbit"),
        "off": ("alexnet", "off", "alexnet_1gbit_off"),
        "vgg11": ("vgg11", "auto", "vgg11_1gbit")}


# host settings: --device-cpus, and the load beside the run (None: none; "none": not held).
# 4 devices of 0.25 CPU and the reserve outside the budgets (0.3) leave 0.7 of 2 CPUs: the
# busier host's load fits; beside devices of 0.425 the host has nothing left for a load, and
# one round shows what the bench says then.
HOSTS = {"quiet-0.425": ("0.425", None), "slower-0.25": ("0.25", None),
         "busier-0.25": ("0.25", "0.6"), "overloaded-0.425": ("0.425", "none")}
BUSIER_ROUNDS = 2
ONE_ROUND = ("overloaded-0.425",)


def busier(lab: Lab) -> list[Step]:
    """One bench call per host setting and round (the order rotated by one each round), each
    beside its load, then the ratios summed up against the quiet host."""
    names = list(HOSTS)
    out = []
    for r in range(BUSIER_ROUNDS):
        for name in names[r:] + names[:r]:
            if r and name in ONE_ROUND:
                continue
            cpus, load = HOSTS[name]
            run = bench(lab, *netns("1gbit"), "--models", "alexnet", "vgg11", *SMALL, *MODES,
                        "--steps", "20", "--device-cpus", cpus, "--quiet",
                        "--out", lab.path(f"busier/{name}_{r + 1}.json")).argv
            if load is not None:
                run = (lab.python, "-m", "lab.tools.cpu_load", "--cpus", load, "--", *run)
            out.append(Step(run, may_fail=True))
    return out + [tool(lab, "pace_ratios", lab.path("busier"), "--reference", names[0],
                       stdout=lab.path("busier_summary.txt"))]


def probe_contention(lab: Lab) -> list[Step]:
    """The pace probe alone and on every device at once, 3 rounds, quiet and beside the
    busier host's load: whether one device's probe sees what a full host does to them."""
    probe = (lab.python, "-m", "lab.tools.probe_contention", "--device-cpus", "0.25",
             "--devices", "4", "--rounds", "3")
    out = lab.path("probe_contention.txt")
    return [Step(probe, stdout=out),
            Step((lab.python, "-m", "lab.tools.cpu_load", "--cpus", HOSTS["busier-0.25"][1],
                  "--", *probe), stdout=out, append=True)]


def steps(lab: Lab) -> list[Step]:
    if lab.setting == "busier":
        return busier(lab)
    if lab.setting == "probe-contention":
        return probe_contention(lab)
    if lab.setting == "main-job":
        return [bench(lab, "--device-cpus", "0.425", "0.25", "--repeat", "3", "--quiet",
                      "--out", lab.path("main_job.json"), may_fail=True)]
    model, dilation, stem = RUNS[lab.setting or "dilated"]
    return [bench(lab, *netns("1gbit"), "--models", model, *SMALL, *MODES, "--steps", "20",
                  "--device-cpus", "0.425", "0.25", "--dilation", dilation, "--repeat", "1",
                  "--quiet", "--out", lab.path(f"{stem}.json"), may_fail=True)]
