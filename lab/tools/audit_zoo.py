"""Placement audits of alexnet, vgg11 and vgg19 (scaled), RALP and plain PS, 1 and 2 PS tasks.

    .venv/bin/python -m lab.tools.audit_zoo [--workers 2] \
        [--out lab/results/audit-zoo/audit_zoo.json]

Each audit is `python -m ralp.audit` in-process: a fresh local cluster, real steps, the
partition graphs worker 0 ran. The table shows what an audit asks to hold: no misplaced ops,
no offloaded-variable bytes crossing in RALP mode, and measured/predicted bytes within 10%.
"""

from __future__ import annotations

import argparse
import json

CASES = [("alexnet", 67, 8), ("vgg11", 32, 8), ("vgg19", 32, 8)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out")
    args = parser.parse_args()

    from ralp.audit.step_audit import AuditSettings, audit

    records = []
    print(f"{'model':8s} {'mode':5s} {'ps':>2s} {'misplaced':>9s} {'offl.var B':>10s} "
          f"{'measured B/step':>16s} {'model B/step':>14s} {'ratio':>7s}")
    for model, image, batch in CASES:
        for mode in ("ralp", "ps"):
            for ps in (1, 2):
                r = audit(AuditSettings(model, mode, args.workers, ps, image, batch))
                keep = {k: v for k, v in r.items() if k not in ("crossings", "plan")}
                keep["command"] = (f"python -m ralp.audit --model {model} --mode {mode} --workers "
                                   f"{args.workers} --ps {ps} --image-size {image} --batch-size {batch}")
                records.append(keep)
                print(f"{model:8s} {mode:5s} {ps:2d} {len(r['misplaced_ops']):9d} "
                      f"{r['offloaded_variable_bytes_crossing']:10d} {r['crossing_bytes_per_step']:16d} "
                      f"{r['model_bytes_per_step']:14d} {r['crossing_to_model_ratio']:7.4f}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(records, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
