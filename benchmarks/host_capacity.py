"""The shared host's capacity against the number of processes training at once (issue 14).

For each model (batch 8, 75 px): 1, 2, 3 and 4 processes forked from the zygote build and warm
up the model, wait on a barrier, and count their training steps over one 8 s window together
(:func:`ralp.planner.capacity.run_together`); capacity = their total steps/s over one
process's alone. Run on a quiet machine, nothing else heavy running:

    .venv/bin/python benchmarks/host_capacity.py vgg11 resnet50 alexnet
"""

from __future__ import annotations

import sys


def main() -> None:
    from ralp.planner.capacity import run_together

    print(f"{'model':<10} {'processes':>9} {'steps/s each':<32} {'total':>6} {'capacity':>8} "
          f"{'start spread s':>14}")
    for model in sys.argv[1:] or ["vgg11", "resnet50", "alexnet"]:
        alone = None
        for processes in (1, 2, 3, 4):
            run = run_together(model, 8, 75, 1000, processes=processes, window_s=8.0)
            alone = alone or run.total_steps_per_s
            each = ", ".join(f"{r:.3f}" for r in run.steps_per_s)
            print(f"{model:<10} {processes:>9} {each:<32} {run.total_steps_per_s:>6.3f} "
                  f"{run.total_steps_per_s / alone:>8.2f} "
                  f"{max(run.started) - min(run.started):>14.3f}", flush=True)


if __name__ == "__main__":  # processes are forked from the zygote: the main module is re-read
    main()
