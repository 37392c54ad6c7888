"""The simulated devices' CFS period as an experiment: does a shorter period (a throttled task
waits less) make budgeted runs at 10 Gbit/s repeat better? One ``python -m ralp.bench`` run
with every device's period set to PERIOD_US (the bench's default is 10 ms):

    python benchmarks/cfs_period.py PERIOD_US BENCH_ARGS...

``benchmarks/run_bench_recorded.sh cfs-period`` interleaves 10 ms and 2.5 ms rounds; the
reading is in benchmarks/README.md ("Simulated devices").
"""

import dataclasses
import sys


def main() -> None:
    import ralp.bench.launcher as launcher

    period_us = int(sys.argv[1])
    budget_for = launcher.budget_for
    launcher.budget_for = lambda asked, devices, **kw: dataclasses.replace(
        budget_for(asked, devices, **kw), period_us=period_us)
    sys.argv = ["ralp.bench", *sys.argv[2:]]
    from ralp.bench.cli import main as bench_main

    bench_main()


if __name__ == "__main__":  # the bench's worker processes re-import this file: nothing to run
    main()
