"""Which threads spend a simulated device's CPU, by mode: every device thread's CPU sampled
by kind and name (lab/tools/thread_cpu.py) over one bench call, inception3 and alexnet, modes
ps, ralp-n and horovod, N = 4 budgeted devices at 10 Gbit/s (compute-bound), image 75, batch
8, 20 steps; then per run the CPU per worker batch of each kind and the busiest thread names,
the workers' devices and the PS task's apart (lab/tools/thread_summary.py). A GPU machine
runs its communication threads (Horovod's background thread and Gloo's, gRPC's) on host CPUs
beside the accelerator; a simulated device pays for them out of its compute budget."""

from lab.experiments._common import SMALL, bench, netns, tool
from lab.registry import Lab, Step

SUMMARY = "each mode's device CPU by kind of thread: compute, Horovod's, gRPC's"
NEEDS = ("root", "horovod")
SETTINGS = {"modes-10gbit": "inception3 and alexnet, ps, ralp-n and horovod, N = 4, 10 Gbit/s"}


def steps(lab: Lab) -> list[Step]:
    stem = lab.path("comm_threads_n4_10gbit")
    run = bench(lab, "--models", "inception3", "alexnet", "--modes", "ps", "ralp-n", "horovod",
                "--devices", "4", *netns("10gbit"), *SMALL, "--steps", "20", "--quiet",
                "--out", f"{stem}.json")
    return [tool(lab, "thread_cpu", "--out", f"{stem}_threads.json", "--", *run.argv),
            tool(lab, "thread_summary", f"{stem}_threads.json", f"{stem}.json", "--names", "8",
                 stdout=lab.path("comm_threads_10gbit.txt"))]
