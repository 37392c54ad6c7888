"""What starting each gradient's sum during the backward pass gains Horovod and Stanza. Setting
``horovod``: the issue's bench setting (alexnet and vgg11, mode horovod, N = 4 budgeted devices, 1 Gbit/s, image 75, batch 8,
20 steps) on the commit before (one grouped allreduce after the backward pass) and the commit
after (one allreduce per gradient), in interleaved rounds (lab/tools/ab_commits.sh, each commit
in a worktree of its own), then each side's median (lab/tools/ab_summary.py). The host is
shared: its load average is recorded before and after the rounds
(``loadavg.txt``). Setting ``stanza``: alexnet in mode stanza at N = 4 with one FC rank
(the bench's default) and with two (both rings), the same way. Settings ``zoo-1gbit`` and
``zoo-10gbit``: mode horovod on the rest of the zoo at 1 Gbit/s and on all of it at 10 Gbit/s
(the issue's target: overlapped at least as fast as grouped on every zoo model). Setting
``buckets-10gbit``: the per-gradient sums (before) against DDP's backward buckets (after: 1 MiB
first, 25 MiB after, one grouped allreduce each; a commit reverted right after it) on the two
models the per-gradient sums lost most on at 10 Gbit/s. Setting ``cpu-10gbit`` runs nothing:
both 10 Gbit/s settings' records summed up again with each side's CPU per worker batch.
Setting ``threads-10gbit``: those two models again, one grouped allreduce (before: a commit
reverted right after it) against the per-gradient sums (after), with every device thread's CPU
sampled by kind (lab/tools/thread_cpu.py): whether what the per-gradient sums cost more per
batch is spent in Horovod's own threads (which a GPU machine runs beside its compute) or in
the step's compute."""

from lab.experiments._common import ZOO
from lab.registry import Lab, Step

SUMMARY = "horovod and stanza with per-gradient allreduces against grouped ones, interleaved"
NEEDS = ("root", "horovod")

BEFORE, AFTER = "960655d", "05b6d2b"
COMMITS = {"buckets-10gbit": ("8e88978", "87fb38b"),  # other settings: (BEFORE, AFTER)
           "threads-10gbit": ("1b45b41", "55a5845")}
SETTINGS = {"horovod": "alexnet and vgg11, mode horovod, N = 4, 1 Gbit/s (the issue's)",
            "stanza": "alexnet, mode stanza with 1 and 2 FC ranks, N = 4, 1 Gbit/s",
            "zoo-1gbit": "overfeat, resnet50 and inception3, mode horovod, N = 4, 1 Gbit/s",
            "zoo-10gbit": "the five zoo models, mode horovod, N = 4, 10 Gbit/s",
            "buckets-10gbit": "inception3 and overfeat, per-gradient sums against backward "
                              "buckets, mode horovod, N = 4, 10 Gbit/s",
            "cpu-10gbit": "no run: zoo-10gbit and buckets-10gbit with their CPU per batch",
            "threads-10gbit": "inception3 and overfeat, grouped against per-gradient sums, "
                              "every device thread's CPU by kind, N = 4, 10 Gbit/s"}
SHAPE = ("--devices", "4", "--image-size", "75", "--batch-size", "8", "--steps", "20",
         "--repeat", "1", "--quiet")
COMMON = ("--bandwidth", "1gbit", *SHAPE)
REST = tuple(m for m in ZOO if m not in ("alexnet", "vgg11"))
BENCH = {"horovod": {"": ("--models", "alexnet", "vgg11", "--modes", "horovod", *COMMON)},
         "stanza": {f"_stanza_fc{f}": ("--models", "alexnet", "--modes", "stanza",
                                       "--fc-workers", f, *COMMON) for f in ("1", "2")},
         "zoo-1gbit": {"_zoo": ("--models", *REST, "--modes", "horovod", *COMMON)},
         "zoo-10gbit": {"_zoo": ("--models", *ZOO, "--modes", "horovod",
                                 "--bandwidth", "10gbit", *SHAPE)},
         "buckets-10gbit": {"_buckets": ("--models", "inception3", "overfeat", "--modes",
                                         "horovod", "--bandwidth", "10gbit", *SHAPE)},
         "threads-10gbit": {"_threads": ("--models", "inception3", "overfeat", "--modes",
                                         "horovod", "--bandwidth", "10gbit", *SHAPE)}}


def steps(lab: Lab) -> list[Step]:
    if lab.setting == "cpu-10gbit":
        return [Step((lab.python, "-m", "lab.tools.ab_summary", "--cpu",
                      lab.path(f"overlap_gain{tail}_n4_10gbit")),
                     stdout=lab.path(f"overlap_gain{tail}_10gbit_cpu.txt"))
                for tail in ("_zoo", "_buckets")]
    load = lab.path("loadavg.txt" if lab.setting == "horovod" else f"loadavg_{lab.setting}.txt")
    before, after = COMMITS.get(lab.setting, (BEFORE, AFTER))
    out = [Step(("cat", "/proc/loadavg"), stdout=load)]
    for tail, bench in BENCH[lab.setting].items():
        rate = bench[bench.index("--bandwidth") + 1]
        prefix = lab.path(f"overlap_gain{tail}_n4_{rate}")
        ab = ("lab/tools/ab_commits.sh", before, after, "2", prefix, "--", *bench)
        if lab.setting == "threads-10gbit":
            ab = (lab.python, "-m", "lab.tools.thread_cpu", "--out", f"{prefix}_threads.json",
                  "--", *ab)
        out += [Step(ab),
                Step(("cat", "/proc/loadavg"), stdout=load, append=True),
                Step((lab.python, "-m", "lab.tools.ab_summary", prefix),
                     stdout=lab.path(f"overlap_gain{tail}_{rate}_summary.txt"
                                     if tail in ("_zoo", "_buckets", "_threads") else f"overlap_gain{tail}_summary.txt"))]
    if lab.setting == "threads-10gbit":
        prefix = lab.path("overlap_gain_threads_n4_10gbit")
        out.append(Step((lab.python, "-m", "lab.tools.thread_summary", f"{prefix}_threads.json",
                         prefix), stdout=lab.path("overlap_gain_threads_10gbit_cpu.txt")))
    return out
