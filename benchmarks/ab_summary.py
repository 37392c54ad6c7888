"""Sum up benchmarks/ab_commits.sh's rounds: per setting, each side's median images/s with
its rounds' min-max, and after / before of the medians.

    .venv/bin/python benchmarks/ab_summary.py benchmarks/results/update_gate_n2_1gbit
"""

from __future__ import annotations

import argparse
import glob
import json
import re
import statistics


def collect(prefix: str) -> dict[tuple[str, str], dict[str, list[float]]]:
    """(model, mode) -> side -> images/s of each round."""
    rows: dict[tuple[str, str], dict[str, list[float]]] = {}
    for path in sorted(glob.glob(f"{glob.escape(prefix)}_*_*.json")):
        found = re.fullmatch(re.escape(prefix) + r"_(before|after)_(\d+)\.json", path)
        if not found:
            continue
        with open(path) as f:
            records = json.load(f)
        for record in records:
            if record.get("error"):
                continue
            key = (record["model"], record["mode"])
            rows.setdefault(key, {}).setdefault(found.group(1), []).append(
                record["images_per_sec"])
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("prefix", help="OUT_PREFIX given to ab_commits.sh")
    args = p.parse_args()
    rows = collect(args.prefix)
    if not rows:
        raise SystemExit(f"ab_summary: no {args.prefix}_{{before,after}}_K.json with records")
    print(f"{'model':<11} {'mode':<8} {'before images/s':>22} {'after images/s':>22} "
          f"{'after/before':>12}")
    for (model, mode), sides in rows.items():
        cells, medians = [], {}
        for side in ("before", "after"):
            values = sides.get(side, [])
            if values:
                medians[side] = statistics.median(values)
                cells.append(f"{medians[side]:.2f} [{min(values):.2f}-{max(values):.2f}] "
                             f"n={len(values)}")
            else:
                cells.append("-")
        ratio = (f"{medians['after'] / medians['before']:.3f}"
                 if len(medians) == 2 else "-")
        print(f"{model:<11} {mode:<8} {cells[0]:>22} {cells[1]:>22} {ratio:>12}")


if __name__ == "__main__":
    main()
