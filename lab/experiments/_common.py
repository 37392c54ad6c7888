"""What the experiments' commands share: the bench, the lab's planner, the lab's tools, and
the steps that gather a bench run made in parts (one call per model or round) into one file."""

from __future__ import annotations

from lab.registry import Lab, Step

# the zoo the budgeted runs sweep, at the size all five build at
ZOO = ("vgg11", "alexnet", "overfeat", "resnet50", "inception3")
SMALL = ("--image-size", "75", "--batch-size", "8")


def netns(bandwidth: str) -> tuple[str, ...]:
    """The simulated cluster with every link shaped at ``bandwidth``."""
    return ("--backend", "netns", "--bandwidth", bandwidth)


def outputs(lab: Lab, stem: str, plot: bool = True) -> tuple[str, ...]:
    """``--out STEM.json`` (the bench writes ``STEM.csv`` beside it) and ``--plot STEM.png``."""
    written = ("--out", lab.path(f"{stem}.json"))
    return (*written, "--plot", lab.path(f"{stem}.png")) if plot else written


# the bench's calibrations with the simulated cluster's probes, which the step models read
CALIBRATION = {"RALP_BENCH_CALIBRATION": "lab.planner.calibrate:bench_command"}
# the product's calibration, asked again each round: this host drifts between rounds
EACH_ROUND = {"RALP_BENCH_CALIBRATION": "lab.planner.calibrate:product_command_each_round"}
LAB_CALIBRATION = "--calibrate"  # a word of these steps, not the bench's: the lab's probes


def bench(lab: Lab, *args: str, may_fail: bool = False, paced: bool = False) -> Step:
    """``python -m ralp.bench ARGS``; ``paced``: with the lab's pace probes attached to the
    devices (and the ``paced`` budget offered), as the records of the host's pace were made.
    The bench calibrates each workload in every round (:data:`EACH_ROUND`); with
    :data:`LAB_CALIBRATION` among ``args`` (taken out of them) that calibration is the lab's
    (:data:`CALIBRATION`)."""
    from lab.host.pace_watcher import ENV

    lab_calibration = LAB_CALIBRATION in args
    env = {**(ENV if paced else {}), **(CALIBRATION if lab_calibration else EACH_ROUND)}
    args = tuple(a for a in args if a != LAB_CALIBRATION)
    prefix = ("env", *(f"{k}={v}" for k, v in env.items())) if env else ()
    return Step((*prefix, lab.python, "-m", "ralp.bench", *args), may_fail=may_fail)


def planner(lab: Lab, *args: str, stdout: str | None = None) -> Step:
    """``python -m lab.planner ARGS``: a validation, or a calibration of simulated devices."""
    return Step((lab.python, "-m", "lab.planner", *args), stdout=stdout)


def validate(lab: Lab, *args: str, stdout: str) -> Step:
    """``python -m lab.planner --validate ARGS > STDOUT``."""
    return planner(lab, "--validate", *args, stdout=stdout)


def tool(lab: Lab, name: str, *args: str, stdout: str | None = None, append: bool = False,
         may_fail: bool = False) -> Step:
    """``python -m lab.tools.NAME ARGS``."""
    return Step((lab.python, "-m", f"lab.tools.{name}", *args), stdout=stdout, append=append,
                may_fail=may_fail)


def gather(lab: Lab, parts: str, names: list[str], *args: str) -> list[Step]:
    """The bench's records of ``parts/NAME.json`` for every name, read back as one run
    (``--show ... ARGS``, where ARGS names the outputs), then the parts' folder removed."""
    files = [lab.path(f"{parts}/{name}.json") for name in names]
    return [bench(lab, "--show", *files, *args), Step(("rm", "-r", lab.path(parts)))]
