"""How long planning takes once a model is calibrated: per zoo model, building the Keras
model, then its profile and every mode's prediction on N = 4..128 machines at two link rates
(lab/tools/plan_timing.py); and one such plan, vgg11's, with its picture."""

from lab.registry import Lab, Step

SUMMARY = "planning time per zoo model, and vgg11's plan on 4 to 128 machines"
NEEDS = ()


def steps(lab: Lab) -> list[Step]:
    calibration = lab.of("plan-calibration", "plan_calibration.json")
    return [Step((lab.python, "-m", "lab.tools.plan_timing", "--compute-profile", calibration),
                 stdout=lab.path("plan_timing.txt")),
            Step((lab.python, "-m", "ralp.planner", "--model", "vgg11", "--batch-size", "8",
                  "--image-size", "75", "--devices", "4", "8", "16", "32", "64", "128",
                  "--bandwidth", "10gbit", "25gbit", "--compute-profile", calibration,
                  "--plot", lab.path("plan_vgg11.png")), stdout=lab.path("plan_vgg11.txt"))]
