"""The cost of counting each batch once: the update gate (no write of a group starts before
every gradient of the group has landed) against the commit before it, one worker and one PS
task on devices of N = 4's budget, 1 Gbit/s, in interleaved rounds (lab/tools/ab_commits.sh,
each commit in a worktree of its own), then each side's median per setting
(lab/tools/ab_summary.py)."""

from lab.registry import Lab, Step

SUMMARY = "the update gate's cost: before and after, interleaved rounds, budgeted"
NEEDS = ("root",)

BEFORE, AFTER = "c204566", "31fa3de"


def steps(lab: Lab) -> list[Step]:
    prefix = lab.path("update_gate_n2_1gbit")
    return [Step(("lab/tools/ab_commits.sh", BEFORE, AFTER, "3", prefix, "--", "--backend",
                  "netns", "--bandwidth", "1gbit", "--models", "vgg11", "resnet50",
                  "--image-size", "75", "--batch-size", "8", "--modes", "ps", "ralp-n",
                  "--devices", "2", "--device-cpus", "0.425", "--steps", "8", "--warmup", "8",
                  "--repeat", "1", "--quiet")),
            Step((lab.python, "-m", "lab.tools.ab_summary", prefix),
                 stdout=lab.path("update_gate_n2_1gbit_summary.txt"))]
