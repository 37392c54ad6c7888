"""The RALP paper's headline on simulated devices: vgg11 at its benchmark size, N = 4
budgeted devices, at a link rate that gives plain PS a network share inside the papers'
range (device-compute), plain PS against RALP-N in interleaved rounds."""

from lab.experiments._common import bench, netns, outputs
from lab.registry import Lab, Step

SUMMARY = "vgg11 at 224 px on 4 budgeted devices, 250 Mbit/s: RALP-N against plain PS"
NEEDS = ("root",)


def steps(lab: Lab) -> list[Step]:
    return [bench(lab, *netns("250mbit"), "--models", "vgg11", "--batch-size", "8", "--modes",
                  "ps", "ralp-n", "--devices", "4", "--steps", "5", "--repeat", "3", "--quiet",
                  *outputs(lab, "devices_headline_vgg11"), may_fail=True)]
