"""How far the host's pace moved between a bench run's rounds, from records made with the lab's
pace watcher attached (``cpu.host_pace``: the work one CPU-second bought, per kind of work):

    .venv/bin/python -m lab.tools.pace_spread RECORDS.json [RECORDS.json ...]

prints, per kind, the largest deviation of a setting's rounds from that setting's median, the
line that says whether a spread between rounds came from the host (CPU-bound settings move
with it) or from the modes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import median

from ralp.bench.records import succeeded
from ralp.bench.rounds import setting_key

KINDS = ("interpreter", "compute", "memory")  # the pace watcher's kinds of work


def pace_spread(records: Sequence[dict]) -> dict[str, float]:
    """Per kind of work, the largest deviation of a round's pace from its setting's median
    over the succeeded records that carry one (kinds no setting has two rounds of left out)."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        pace = (r.get("cpu") or {}).get("host_pace")
        if succeeded(r) and pace:
            groups.setdefault(setting_key(r), []).append(pace)
    spread = {}
    for kind in KINDS:
        deviations = []
        for rows in groups.values():
            values = [p[kind] for p in rows if p.get(kind)]
            if len(values) > 1:
                mid = median(values)
                deviations.append(max(abs(v / mid - 1) for v in values))
        if deviations:
            spread[kind] = max(deviations)
    return spread


def pace_line(records: Sequence[dict]) -> str:
    spread = pace_spread(records)
    if not spread:
        return "host pace: no setting has two rounds that carry it (is the pace watcher on?)"
    cells = ", ".join(f"{kind} {value:.0%}" for kind, value in spread.items())
    return ("host pace (work per CPU-second) between a setting's rounds, largest deviation "
            f"from its median: {cells}; CPU-bound settings move with it")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.tools.pace_spread", description=__doc__)
    p.add_argument("records", nargs="+", help="bench JSON records")
    args = p.parse_args(argv)
    records = []
    for path in args.records:
        try:
            records += json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            print(f"lab.tools.pace_spread: cannot read {path}: {e}", file=sys.stderr)
            return 2
    print(pace_line(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
