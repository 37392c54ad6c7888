"""A gRPC transfer's CPU per byte on the simulated fabric, read from budgeted records, beside
the calibration's figure (loopback, unshaped: :func:`ralp.planner.transfer.measure_transfer`).

The planner charges each end of a plain PS transfer half of the calibration's
``cpu_s_per_byte``. The budgeted records carry what the tasks really used: every task's CPU
over the measured window (its control group's counter) and every link's bytes over the same
window. For plain PS records with a calibration:

- **PS end:** the busiest PS task's CPU-seconds over the bytes it sent and received (it
  computes nothing: its CPU is its transfers and the updates it applies);
- **worker end:** a worker's CPU-seconds per batch less the calibrated compute
  (``full_s`` x the device's CPUs), over the bytes it sent and received per batch.

Both include the per-transfer cost (:attr:`ralp.planner.host.Host.cpu_s_per_message`); it is
small for vgg11, alexnet and overfeat (at most 22 variables), not for resnet50 and inception3
(hundreds), so the summary takes the first three only. Reads records, runs nothing:

    .venv/bin/python benchmarks/transfer_cpu.py benchmarks/results/devices_zoo_1gbit.json ... \\
        --out benchmarks/results/transfer_cpu.json > benchmarks/results/transfer_cpu.txt
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

FEW_VARIABLES = ("vgg11", "alexnet", "overfeat")  # the per-transfer cost is negligible
MIN_BYTES_PER_BATCH = 1e6  # PS tasks below this carry too little for a per-byte figure


def record_figures(record: dict) -> dict | None:
    """(PS end, worker end, calibration's per end) CPU seconds per byte of one plain PS
    record, or None where it lacks budgets, a calibration or link counters."""
    cpu, calibration, links = record.get("cpu"), record.get("calibration"), record.get("links")
    if (record.get("mode") != "ps" or not cpu or not cpu.get("tasks") or not calibration
            or not links or not calibration["host"].get("device_cpus")):
        return None
    host, compute = calibration["host"], calibration["entries"][0]
    batches, wall = record["measured_steps"], cpu["wall_s"]
    own = batches / record["workers"]  # each worker's batches in the window
    ps_rows = [(links[t]["tx"] + links[t]["rx"], row["used_cpus"] * wall)
               for t, row in cpu["tasks"].items() if t.startswith("ps") and t in links]
    nbytes, seconds = max(ps_rows, key=lambda row: row[0])
    if nbytes / batches < MIN_BYTES_PER_BATCH:
        return None
    compute_cpu_s = compute["full_s"] * host["device_cpus"]
    worker = [(row["used_cpus"] * wall / own - compute_cpu_s)
              / ((links[t]["tx"] + links[t]["rx"]) / own)
              for t, row in cpu["tasks"].items() if t.startswith("worker") and t in links]
    return {"ps_end": seconds / nbytes, "worker_end": statistics.median(worker),
            "calibrated_end": host["cpu_s_per_byte"] / 2}


def rows_of(paths: list[str]) -> list[dict]:
    """One row per (file, model, N, link rate): the medians over its records, in ns per byte."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for path in paths:
        for record in json.loads(Path(path).read_text()):
            figures = record_figures(record)
            if figures is not None:
                key = (Path(path).stem, record["model"], record["devices"], record["bandwidth"])
                groups[key].append(figures)
    rows = []
    for (source, model, devices, bandwidth), found in groups.items():
        median = {k: statistics.median(f[k] for f in found) * 1e9 for k in found[0]}
        rows.append({"source": source, "model": model, "devices": devices,
                     "bandwidth": bandwidth, "records": len(found),
                     **{f"{k}_ns_per_byte": round(v, 3) for k, v in median.items()}})
    return rows


def summary(rows: list[dict]) -> dict[str, dict]:
    """Per link rate, over the FC-heavy models' rows: the median of each end over the
    calibration's figure."""
    out: dict[str, dict] = {}
    for bandwidth in sorted({r["bandwidth"] for r in rows}):
        mine = [r for r in rows if r["bandwidth"] == bandwidth and r["model"] in FEW_VARIABLES]
        if mine:
            out[bandwidth] = {
                end: round(statistics.median(r[f"{end}_ns_per_byte"]
                                             / r["calibrated_end_ns_per_byte"] for r in mine), 2)
                for end in ("ps_end", "worker_end")} | {"rows": len(mine)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+", help="bench results JSON files")
    parser.add_argument("--out", help="write the rows and the summary as JSON here")
    args = parser.parse_args()
    rows = rows_of(args.records)
    if not rows:
        raise SystemExit("no budgeted plain PS records with a calibration in these files")
    print(f"{'records':<26} {'model':<10} {'N':>2} {'link':>7} {'PS end':>7} {'worker':>7} "
          f"{'calib.':>7}  (ns of CPU per byte sent or received, each end)")
    for r in rows:
        print(f"{r['source']:<26} {r['model']:<10} {r['devices']:>2} {r['bandwidth']:>7} "
              f"{r['ps_end_ns_per_byte']:>7.2f} {r['worker_end_ns_per_byte']:>7.2f} "
              f"{r['calibrated_end_ns_per_byte']:>7.2f}")
    totals = summary(rows)
    for bandwidth, s in totals.items():
        print(f"{bandwidth}: over {s['rows']} vgg11 / alexnet / overfeat rows, the PS end used "
              f"{s['ps_end']:.2f}x and a worker {s['worker_end']:.2f}x the calibration's figure")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "summary": totals}, indent=1) + "\n")


if __name__ == "__main__":
    main()
