"""Every workload of the shared-CPU records calibrated on this host for the simulated cluster
whose tasks share its cores (``--shared-host``: each workload's compute, a transfer's cost
and the host's capacity for it, processes timing one window together). Each workload is added
to a new file, which replaces the old one once all are in. Run it on a quiet machine."""

from lab.experiments._common import planner
from lab.registry import Lab, Step

SUMMARY = "the zoo's calibration for the shared-CPU records (8 workloads, --shared-host)"
NEEDS = ()

# (model, batch, image size) of every recorded shared-CPU run
WORKLOADS = (("vgg11", "8", "75"), ("alexnet", "8", "75"), ("overfeat", "8", "75"),
             ("resnet50", "8", "75"), ("inception3", "8", "75"), ("vgg11", "4", "224"),
             ("vgg11", "8", "64"), ("resnet50", "8", "32"))


def steps(lab: Lab) -> list[Step]:
    new = lab.path("plan_calibration.new.json")
    return [Step(("rm", "-f", new)),
            *(planner(lab, "--calibrate", "--shared-host", "--model", model, "--batch-size",
                      batch, "--image-size", size, "--output", new)
              for model, batch, size in WORKLOADS),
            Step(("mv", new, lab.path("plan_calibration.json")))]
