"""Mode auto against the best measured mode in every setting of Stanza's two sweeps: first
``--modes auto`` where auto's pick is not in the sweeps (Stanza with several FC ranks), then
lab/tools/auto_vs_best.py over the sweeps and those runs, from the zoo's calibration."""

from lab.experiments._common import SMALL, bench, gather, netns, tool
from lab.registry import Lab, Step

SUMMARY = "--modes auto against the best measured mode, Stanza's sweeps (shared CPUs)"
NEEDS = ("root", "horovod")

# (link, model, N) where auto picks a configuration the sweeps did not run
PICKS = (("1gbit", "resnet50", "4"), ("10gbit", "resnet50", "4"), ("10gbit", "resnet50", "8"),
         ("10gbit", "inception3", "4"))


def steps(lab: Lab) -> list[Step]:
    calibration = lab.of("plan-calibration", "plan_calibration.json")
    names = sorted("-".join(pick) for pick in PICKS)
    runs = [bench(lab, *netns(rate), "--models", model, *SMALL, "--modes", "auto", "--devices",
                  n, "--steps", "3", "--device-cpus", "shared", "--quiet", "--compute-profile",
                  calibration, "--out", lab.path(f"parts/{rate}-{model}-{n}.json"),
                  may_fail=True)
            for rate, model, n in PICKS]
    return [*runs, *gather(lab, "parts", names, "--out", lab.path("bench_auto.json")),
            tool(lab, "auto_vs_best", lab.of("stanza-sweep", "bench_stanza_1gbit.json"),
                 lab.of("stanza-sweep", "bench_stanza_10gbit.json"), lab.path("bench_auto.json"),
                 "--compute-profile", calibration, "--out", lab.path("auto_vs_best.json"))]
