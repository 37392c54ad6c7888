"""Does the host's pace explain how far a setting's rounds lie apart? (issue 25 (a))

Reads bench records made with ``--repeat`` on budgeted devices, whose ``cpu.host_pace`` holds
the work one CPU-second bought in each record's window (:mod:`ralp.emulation.pace`), and
prints, per setting (model, mode, device budget, link):

- each round's images/s as its deviation from the setting's median, and beside it each kind
  of pace's deviation from its median over the same rounds;
- over every budgeted setting with at least 3 rounds, the correlation (Pearson) between a
  round's images/s deviation and each kind's pace deviation, per mode;
- the largest per-round deviation before and after dividing each round's images/s by its
  pace relative to the setting's median, for each kind: how much of the spread the host's
  pace accounts for.

    .venv/bin/python benchmarks/pace_spread.py benchmarks/results/devices_repeat_10gbit.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ralp.bench.records import succeeded  # noqa: E402
from ralp.emulation.pace import KINDS  # noqa: E402


def settings(records: list[dict]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        cpu = r.get("cpu") or {}
        if succeeded(r) and (cpu.get("host_pace") or {}).get("compute"):
            out[(r["model"], r["mode"], str(r.get("device_cpus")), r["bandwidth"])].append(r)
    return {k: sorted(v, key=lambda r: r["round"]) for k, v in out.items() if len(v) >= 3}


def deviations(values: list[float]) -> list[float]:
    mid = statistics.median(values)
    return [v / mid - 1 for v in values]


def worst(values: list[float]) -> float:
    return max(abs(d) for d in deviations(values))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("records", nargs="+")
    args = p.parse_args()
    records = [r for path in args.records for r in json.loads(Path(path).read_text())]
    groups = settings(records)
    if not groups:
        raise SystemExit("no setting with 3 or more rounds carries cpu.host_pace")
    pairs: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    print("setting | images/s per round (vs median) | " + " | ".join(KINDS))
    for key, rows in groups.items():
        ips = deviations([r["images_per_sec"] for r in rows])
        paces = {k: deviations([r["cpu"]["host_pace"][k] for r in rows]) for k in KINDS}
        for k in KINDS:
            pairs[(key[1], k)] += list(zip(ips, paces[k], strict=True))
            pairs[("all", k)] += list(zip(ips, paces[k], strict=True))
        cells = [" ".join(f"{d:+.2f}" for d in paces[k]) for k in KINDS]
        print(f"{' '.join(key)} | {' '.join(f'{d:+.2f}' for d in ips)} | " + " | ".join(cells))
    print("\ncorrelation of a round's images/s deviation with its pace deviation")
    for (mode, kind), xy in sorted(pairs.items()):
        r = statistics.correlation(*zip(*xy, strict=True)) if len(xy) > 2 else float("nan")
        print(f"  {mode:8s} {kind:12s} r = {r:+.2f} over {len(xy)} rounds")
    print("\nlargest per-round deviation of images/s: as measured, then divided by each "
          "round's pace (as a share of the setting's median pace)")
    print(f"  {'setting':40s} {'measured':>8s} " + " ".join(f"{k:>11s}" for k in KINDS))
    for key, rows in groups.items():
        ips = [r["images_per_sec"] for r in rows]
        cells = []
        for kind in KINDS:
            pace = [r["cpu"]["host_pace"][kind] for r in rows]
            mid = statistics.median(pace)
            cells.append(worst([v / (q / mid) for v, q in zip(ips, pace, strict=True)]))
        print(f"  {' '.join(key):40s} {worst(ips):8.1%} " + " ".join(f"{c:11.1%}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
