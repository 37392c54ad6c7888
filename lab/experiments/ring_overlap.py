"""The rings' terms on a budgeted device, each a calibration of alexnet inside one device's
budget (lab.planner --calibrate --device-cpus auto): how much of each ring's wire time its
CPU overlaps, Gloo's wire factor with it, and the overlap at several wire/CPU ratios. The
files are lent to the budgeted records' validations (planner-devices, ``--overlap-from``):
the records' own calibrations predate these terms."""

from lab.experiments._common import planner
from lab.registry import Lab, Step

SUMMARY = "the rings' overlap of wire and CPU, and Gloo's wire factor, per device budget"
NEEDS = ("root", "horovod")
SETTINGS = {"overlap": "N = 4 and 8 (the files from before the wire factor was measured)",
            "wire": "N = 4, 6 and 8: the wire factor and the overlap together",
            "curve": "N = 4 and 8, the overlap at wire/CPU ratios 1/3, 1 and 3 (opt-in)"}

RUNS = {"overlap": ("ring_overlap", ("4", "8"), ()),
        "wire": ("ring_wire", ("4", "6", "8"), ()),
        "curve": ("ring_overlap_curve", ("4", "8"), ("--overlap-ratios", "0.3333", "1", "3"))}


def steps(lab: Lab) -> list[Step]:
    stem, counts, extra = RUNS[lab.setting]
    return [planner(lab, "--calibrate", "--model", "alexnet", "--batch-size", "8",
                    "--image-size", "75", "--device-cpus", "auto", "--devices", n, *extra,
                    "--output", lab.path(f"{stem}_n{n}.json"))
            for n in counts]
