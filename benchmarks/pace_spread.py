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
  pace accounts for;
- each mode's ratio to plain PS in the same round (median and largest deviation), and for
  paced budgets (``--device-cpus paced``) what the governor did.

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
    print_ratios(groups)
    return 0


def print_ratios(groups: dict[tuple, list[dict]]) -> None:
    """Each setting's ratio to plain PS in the same round (same model, budget and link): its
    median and largest deviation; for paced budgets, the governor's quota share and the share
    of time the host was slower than the reference, min-max over the rounds."""
    print("\nratio to plain PS in the same round: median, largest per-round deviation; paced: "
          "quota share and time under the reference, min-max")
    for key, rows in groups.items():
        ps = {r["round"]: r["images_per_sec"] for r in groups.get((key[0], "ps", *key[2:]), [])}
        ratios = [r["images_per_sec"] / ps[r["round"]] for r in rows if r["round"] in ps]
        ratio = (f"{statistics.median(ratios):5.2f}x {worst(ratios):6.1%}"
                 if len(ratios) >= 3 and key[1] != "ps" else f"{'-':>14s}")
        paced = [r["cpu"].get("paced") or {} for r in rows]
        shares = [p["quota_share"] for p in paced if "quota_share" in p]
        under = [p["under_reference_share"] for p in paced if "under_reference_share" in p]
        extra = (f"  quota {min(shares):.2f}-{max(shares):.2f}, under {min(under):.2f}-{max(under):.2f}"
                 if shares else "")
        print(f"  {' '.join(key):40s} {ratio}{extra}")


if __name__ == "__main__":
    sys.exit(main())
