"""Sum up lab/tools/ab_commits.sh's rounds: per setting, each side's median images/s with
its rounds' min-max (``ralp.bench.rounds.summarize``, as ``--repeat`` does), and after /
before of the medians.

    .venv/bin/python -m lab.tools.ab_summary lab/results/update-gate/update_gate_n2_1gbit
"""

from __future__ import annotations

import argparse
import glob
import json
import re

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


def _cell(summary: dict | None) -> str:
    spread = summary and summary["images_per_sec_spread"]
    if not spread:
        return "-"
    return (f"{spread['median']:.2f} [{spread['min']:.2f}-{spread['max']:.2f}] "
            f"n={summary['rounds'] - summary['failed']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("prefix", help="OUT_PREFIX given to ab_commits.sh")
    args = p.parse_args()
    by_side = {side: {setting_key(s): s for s in summarize(records)}
               for side, records in side_records(args.prefix).items()}
    keys = list(dict.fromkeys([*by_side["before"], *by_side["after"]]))
    if not keys:
        raise SystemExit(f"ab_summary: no {args.prefix}_{{before,after}}_K.json with records")
    print(f"{'model':<11} {'mode':<8} {'before images/s':>22} {'after images/s':>22} "
          f"{'after/before':>12}")
    for key in keys:
        before, after = (by_side[side].get(key) for side in SIDES)
        first = before or after
        medians = [s and s["images_per_sec"] for s in (before, after)]
        ratio = f"{medians[1] / medians[0]:.3f}" if all(medians) else "-"
        print(f"{first['model']:<11} {first['mode']:<8} {_cell(before):>22} {_cell(after):>22} "
              f"{ratio:>12}")


if __name__ == "__main__":
    main()
