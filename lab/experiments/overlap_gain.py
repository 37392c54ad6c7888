"""What starting each gradient's sum during the backward pass gains Horovod: the issue's bench
setting (alexnet and vgg11, mode horovod, N = 4 budgeted devices, 1 Gbit/s, image 75, batch 8,
20 steps) on the commit before (one grouped allreduce after the backward pass) and the commit
after (one allreduce per gradient), in interleaved rounds (lab/tools/ab_commits.sh, each commit
in a worktree of its own), then each side's median (lab/tools/ab_summary.py). The host is
shared: its load average is recorded before and after the rounds
(``loadavg.txt``)."""

from lab.registry import Lab, Step

SUMMARY = "horovod with per-gradient allreduces against one grouped allreduce, interleaved"
NEEDS = ("root", "horovod")

BEFORE, AFTER = "960655d", "05b6d2b"
BENCH = ("--models", "alexnet", "vgg11", "--modes", "horovod", "--devices", "4", "--bandwidth",
         "1gbit", "--image-size", "75", "--batch-size", "8", "--steps", "20", "--repeat", "1",
         "--quiet")


def steps(lab: Lab) -> list[Step]:
    prefix = lab.path("overlap_gain_n4_1gbit")
    load = lab.path("loadavg.txt")
    return [Step(("cat", "/proc/loadavg"), stdout=load),
            Step(("lab/tools/ab_commits.sh", BEFORE, AFTER, "2", prefix, "--", *BENCH)),
            Step(("cat", "/proc/loadavg"), stdout=load, append=True),
            Step((lab.python, "-m", "lab.tools.ab_summary", prefix),
                 stdout=lab.path("overlap_gain_summary.txt"))]
