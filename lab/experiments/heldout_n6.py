"""Settings no record covered, predicted before they were measured: alexnet on N = 6
budgeted devices at 2.5 Gbit/s (calibrated, predicted, then run), and vgg11 on N = 6 at
750 Mbit/s past the epoch's first cycles (calibrated and predicted first; plain PS and RALP-N
measured, then every mode the prediction ranks on a later day with a calibration of that
day). planner-devices validates the runs against both days' calibrations."""

from lab.experiments._common import bench, netns, outputs, planner
from lab.registry import Lab, Step

SUMMARY = "held-out settings, predicted before measured: alexnet and vgg11 on N = 6"
NEEDS = ("root", "horovod")
SETTINGS = {"alexnet": "alexnet, N = 6, 2.5 Gbit/s: calibrated, predicted, measured",
            "vgg11-predict": "vgg11, N = 6, 750 Mbit/s: calibrated and predicted",
            "vgg11": "the same measured past the first cycles, plain PS and RALP-N",
            "vgg11-all": "every mode the prediction ranks, and that day's calibration"}

SIX = ("--batch-size", "8", "--image-size", "75", "--devices", "6")


def calibrate(lab: Lab, model: str, output: str, *extra: str) -> Step:
    return planner(lab, "--calibrate", "--model", model, "--batch-size", "8", "--image-size",
                   "75", "--device-cpus", "auto", "--devices", "6", *extra,
                   "--output", lab.path(output))


def predict(lab: Lab, model: str, rate: str, stem: str, stdout: str | None = None) -> Step:
    """The plan from the calibration made for the setting (``python -m ralp.planner``)."""
    return Step((lab.python, "-m", "ralp.planner", "--model", model, *SIX, "--bandwidth", rate,
                 "--compute-profile", lab.path(f"{stem}_calibration.json"),
                 "--csv", lab.path(f"{stem}_prediction.csv")), stdout=stdout)


def measure(lab: Lab, model: str, rate: str, stem: str, *args: str) -> Step:
    return bench(lab, *netns(rate), "--models", model, "--image-size", "75", "--batch-size", "8",
                 *args, "--quiet", *outputs(lab, stem), may_fail=True)


def steps(lab: Lab) -> list[Step]:
    past_cycles = ("--device-cpus", "0.283", "--steps", "12", "--warmup", "16", "--repeat", "3")
    if lab.setting == "alexnet":
        return [calibrate(lab, "alexnet", "heldout_alexnet_n6_calibration.json"),
                predict(lab, "alexnet", "2500mbit", "heldout_alexnet_n6"),
                measure(lab, "alexnet", "2500mbit", "heldout_alexnet_n6", "--modes", "ps",
                        "ralp-n", "horovod", "stanza", "--devices", "6", "--steps", "10",
                        "--repeat", "3")]
    if lab.setting == "vgg11-predict":
        return [calibrate(lab, "vgg11", "heldout_vgg11_n6_calibration.json",
                          "--transfer-rates", "750mbit"),
                predict(lab, "vgg11", "750mbit", "heldout_vgg11_n6",
                        stdout=lab.path("heldout_vgg11_n6_prediction.txt"))]
    if lab.setting == "vgg11":
        return [measure(lab, "vgg11", "750mbit", "heldout_vgg11_n6", "--modes", "ps", "ralp-n",
                        "--devices", "6", *past_cycles, "--calibrate")]
    return [measure(lab, "vgg11", "750mbit", "heldout_vgg11_n6_all", "--modes", "ps", "ralp-n",
                    "horovod", "stanza", "--devices", "6", *past_cycles),
            calibrate(lab, "vgg11", "heldout_vgg11_n6_all_calibration.json",
                      "--transfer-rates", "750mbit")]
