"""The planner's validation set on shared CPUs: every model and mode at N = 4 or 8, 10 steps
per worker, each workload calibrated just before its runs (``--calibrate``: the records carry
it, with Stanza's phases measured beside Horovod's ranks), and Stanza alone the same way.
One bench call per model; the parts are read back as one file. plan-validation predicts
them."""

from lab.experiments._common import bench, gather, netns
from lab.registry import Lab, Step

SUMMARY = "every model and mode calibrated beside its runs, N = 4 and 8 (shared CPUs)"
NEEDS = ("root", "horovod")
SETTINGS = {"n4-10gbit": "every mode, N = 4, 10 Gbit/s",
            "n4-1gbit": "every mode, N = 4, 1 Gbit/s",
            "n8-10gbit": "every mode, N = 8, 10 Gbit/s",
            "n8-1gbit": "every mode, N = 8, 1 Gbit/s (no record yet)",
            "stanza-10gbit": "Stanza alone, N = 4, 10 Gbit/s",
            "stanza-1gbit": "Stanza alone, N = 4, 1 Gbit/s"}

MODELS = ("alexnet", "vgg11", "resnet50", "inception3", "overfeat")
FILES = {"n4": "bench_plan_steady", "n8": "bench_plan_steady8", "stanza": "bench_plan_stanza"}


def steps(lab: Lab) -> list[Step]:
    kind, rate = lab.setting.split("-")
    modes = ("stanza",) if kind == "stanza" else ("ps", "ralp-h", "ralp-n", "horovod", "stanza")
    devices = "8" if kind == "n8" else "4"
    parts = f"parts-{lab.setting}"
    runs = [bench(lab, *netns(rate), "--models", model, "--modes", *modes, "--devices", devices,
                  "--batch-size", "8", "--image-size", "75", "--steps", "10", "--warmup", "2",
                  "--calibrate",
                  "--device-cpus", "shared", "--quiet",
                  "--out", lab.path(f"{parts}/{model}.json"), may_fail=True)
            for model in MODELS]
    return runs + gather(lab, parts, sorted(MODELS),
                         "--out", lab.path(f"{FILES[kind]}_{rate}.json"))
