"""How long one budgeted simulated device computes a step, and the link rates that give the
papers' compute-to-network ratios.

    .venv/bin/python -m lab.tools.device_compute --models vgg11 alexnet overfeat resnet50 \\
        inception3 --devices 4 8 --image-size 75 --batch-size 8 \\
        --out lab/results/device-compute/device_compute.json

For each model and N, one device's training step (forward, backward, SGD update) is timed in
a fresh process inside the budget the bench gives each of N devices
(:func:`ralp.planner.device.device_entry`). Against it stands what plain PS moves over a
worker's link per step: the model's parameters pulled and its gradients pushed, 2 x S bytes.

The RALP paper (Park et al., arXiv:1901.05803, section 1) reports communication at 50-90% of
a step on real clusters. A link rate B gives plain PS a network share of
``(2 S / B) / (T + 2 S / B)``; the rates below give 50% and 90%, so that runs at rates
between them bracket the papers' testbeds. Needs root for the budgets (without it, the
devices share the host and the figures say so).
"""

from __future__ import annotations

import argparse
import json
import sys

from ralp.models import build_model
from ralp.planner.device import device_entry
from ralp.profiler.api import profile

SHARES = (0.5, 0.9)  # plain PS's network share of a step on the papers' clusters


def rate_for_share(model_bytes: float, step_s: float, share: float) -> float:
    """Bits/s at which plain PS's per-step transfer (2 x model bytes) is ``share`` of the
    step: 2S/B = share / (1 - share) x T."""
    return 2 * model_bytes * 8 / (share / (1 - share) * step_s)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", required=True)
    p.add_argument("--devices", nargs="+", type=int, default=[4])
    p.add_argument("--image-size", type=int, default=75)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--out")
    args = p.parse_args(argv)
    rows = []
    for model in args.models:
        net = build_model(model, num_classes=args.num_classes, image_size=args.image_size)
        model_bytes = profile(net, args.batch_size).params_total * 4
        for n in args.devices:
            entry, budget = device_entry(model, args.batch_size, args.image_size,
                                         args.num_classes, devices=n, steps=args.steps)
            rates = {f"gbit_for_{round(s * 100)}pct": rate_for_share(model_bytes, entry.full_s, s) / 1e9
                     for s in SHARES}
            rows.append({"model": model, "devices": n, "budget": budget.describe(),
                         "device_cpus": budget.cpus, "model_bytes": model_bytes,
                         "step_s": entry.full_s, "head_s": entry.head_s,
                         "tail_s": entry.tail_s, **rates})
            print(f"{model:11s} N={n}  {budget.describe():30s} step {entry.full_s:7.3f} s  "
                  f"S {model_bytes / 1e6:7.1f} MB  50%: {rates['gbit_for_50pct']:6.2f} Gbit/s"
                  f"  90%: {rates['gbit_for_90pct']:6.2f} Gbit/s", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"command": " ".join(sys.argv), "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
