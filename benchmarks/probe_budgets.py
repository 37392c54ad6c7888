"""The FLOP-rate probe (``ralp.planner.estimate.probe``, what ``ralp.wrap`` waits for) at
several settings, interleaved in one process: its rates and how long it takes, median
[min-max] over the rounds. Needs a quiet machine.

    .venv/bin/python benchmarks/probe_budgets.py --settings 1.5:10 0.6:5 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--settings", nargs="+", default=["0.6:5", "0.3:4"],
                   help="BUDGET_S:STACK pairs")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    import tensorflow  # noqa: F401  - imported before timing

    from ralp.planner.estimate import probe

    settings = [(float(b), int(k)) for b, k in (s.split(":") for s in args.settings)]
    rows: dict[tuple[float, int], list[tuple[float, ...]]] = {s: [] for s in settings}
    for _ in range(args.rounds):
        for budget, stack in settings:
            r = probe(budget, stack)
            rows[(budget, stack)].append((r.conv_flops_per_s / 1e9, r.fc_flops_per_s / 1e9,
                                          r.other_flops_per_s / 1e9, r.per_layer_s * 1e3,
                                          r.probe_s))
    names = ("conv GFLOP/s", "fc GFLOP/s", "other GFLOP/s", "per layer ms", "probe s")
    print("budget s  stack  " + "  ".join(f"{n:>22}" for n in names))
    for (budget, stack), values in rows.items():
        cells = [f"{statistics.median(c):.3g} [{min(c):.3g}-{max(c):.3g}]"
                 for c in zip(*values, strict=True)]
        print(f"{budget:>8} {stack:>6}  " + "  ".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()
