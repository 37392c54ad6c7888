"""The README's results table and the results page's headline, measured again in the reference
device's time (links dilated by each budget's pace, ``--dilation auto``) with the baselines as
they now run (Horovod's and Stanza's reductions behind the backward pass): N = 4 budgeted
devices, four modes in interleaved rounds, one bench run per link rate."""

from lab.experiments._common import SMALL, bench, netns, outputs
from lab.registry import Lab, Step

SUMMARY = "the README's table again: reference time, overlapped baselines, interleaved rounds"
NEEDS = ("root", "horovod")
SETTINGS = {"1gbit": "alexnet, vgg11 and resnet50 at 75 px, 1 Gbit/s, 20 steps per worker, "
                     "3 rounds",
            "10gbit": "alexnet and vgg11 at 75 px, 10 Gbit/s, 20 steps per worker, 3 rounds",
            "224px": "vgg11 at 224 px, 250 Mbit/s, plain PS and RALP-N, 5 steps, 3 rounds"}

MODES = ("--modes", "ps", "ralp-n", "horovod", "stanza", "--devices", "4")


def steps(lab: Lab) -> list[Step]:
    stem = f"reference_table_{lab.setting}"
    if lab.setting == "224px":
        args = ("--models", "vgg11", "--batch-size", "8", "--modes", "ps", "ralp-n",
                "--devices", "4", "--steps", "5")
        rate = "250mbit"
    else:
        models = ("alexnet", "vgg11", "resnet50") if lab.setting == "1gbit" else ("alexnet",
                                                                                 "vgg11")
        args = ("--models", *models, *SMALL, *MODES, "--steps", "20")
        rate = lab.setting
    return [bench(lab, *netns(rate), *args, "--repeat", "3", "--quiet", *outputs(lab, stem),
                  may_fail=True)]
