"""Sum up lab/tools/ab_commits.sh's rounds: per setting, each side's median images/s with
its rounds' min-max (``ralp.bench.rounds.summarize``, as ``--repeat`` does), and after /
before of the medians. ``--cpu``: each side's median CPU per worker batch too (the budgeted
devices' CPU over the measured window, summed, per worker batch: what a step costs on devices
that are compute-bound).

    .venv/bin/python -m lab.tools.ab_summary lab/results/update-gate/update_gate_n2_1gbit
"""

from __future__ import annotations

import argparse
import glob
import json
import re
from statistics import median

from ralp.bench.rounds import setting_key, summarize

SIDES = ("before", "after")


def side_records(prefix: str) -> dict[str, list[dict]]:
    """Each side's records of every round."""
    records: dict[str, list[dict]] = {side: [] for side in SIDES}
    for path in sorted(glob.glob(f"{glob.escape(prefix)}_*_*.json")):
        found = re.fullmatch(re.escape(prefix) + r"_(before|after)_(\d+)\.json", path)
        if found:
            with open(path) as f:
                records[found.group(1)] += json.load(f)
    return records


def cpu_per_batch(record: dict) -> float | None:
    """The budgeted devices' CPU seconds over the measured window, summed, per worker batch."""
    cpu = record.get("cpu") or {}
    used = [row["used_cpus"] for row in (cpu.get("tasks") or {}).values() if "budget_use" in row]
    if record.get("error") or not (used and cpu.get("wall_s") and record.get("measured_steps")):
        return None
    return sum(used) * cpu["wall_s"] / record["measured_steps"]


def cpu_medians(records: list[dict]) -> dict[tuple, float]:
    """Per setting, the median over rounds of :func:`cpu_per_batch`."""
    found: dict[tuple, list[float]] = {}
    for r in records:
        cost = cpu_per_batch(r)
        if cost is not None:
            found.setdefault(setting_key(r), []).append(cost)
    return {key: median(costs) for key, costs in found.items()}


def _cell(summary: dict | None) -> str:
    spread = summary and summary["images_per_sec_spread"]
    if not spread:
        return "-"
    return (f"{spread['median']:.2f} [{spread['min']:.2f}-{spread['max']:.2f}] "
            f"n={summary['rounds'] - summary['failed']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("prefix", help="OUT_PREFIX given to ab_commits.sh")
    p.add_argument("--cpu", action="store_true", help="each side's CPU per worker batch too")
    args = p.parse_args()
    records = side_records(args.prefix)
    by_side = {side: {setting_key(s): s for s in summarize(rs)} for side, rs in records.items()}
    cpu = {side: cpu_medians(rs) for side, rs in records.items()}
    keys = list(dict.fromkeys([*by_side["before"], *by_side["after"]]))
    if not keys:
        raise SystemExit(f"ab_summary: no {args.prefix}_{{before,after}}_K.json with records")
    print(f"{'model':<11} {'mode':<8} {'before images/s':>22} {'after images/s':>22} "
          f"{'after/before':>12}" + ("  CPU s/batch before  after  after/before" if args.cpu
                                     else ""))
    for key in keys:
        before, after = (by_side[side].get(key) for side in SIDES)
        first = before or after
        medians = [s and s["images_per_sec"] for s in (before, after)]
        ratio = f"{medians[1] / medians[0]:.3f}" if all(medians) else "-"
        line = (f"{first['model']:<11} {first['mode']:<8} {_cell(before):>22} "
                f"{_cell(after):>22} {ratio:>12}")
        if args.cpu:
            costs = [cpu[side].get(key) for side in SIDES]
            change = f"{costs[1] / costs[0]:.3f}" if all(costs) else "-"
            line += "".join(f"{c:>{w}.3f}" if c else f"{'-':>{w}}"
                            for c, w in zip(costs, (20, 7), strict=True)) + f"{change:>14}"
        print(line)


if __name__ == "__main__":
    main()
