"""gRPC's CPU per byte on the simulated fabric, measured by the calibration's probe
(:mod:`lab.planner.fabric_transfer`) at several link rates and device budgets, beside the
loopback probe's figure (:func:`lab.planner.transfer.measure_transfer`) and, where given, the
figures the budgeted plain PS records show (the JSON of lab/results/transfer-cpu). Beside
``--out`` it writes, for each budget, a calibration that holds only these figures
(``<out>_n<N>_calibration.json``): ``python -m ralp.planner --validate ... --overlap-from``
lends them to records whose own calibrations predate the probe.

    .venv/bin/python -m lab.tools.fabric_transfer_cpu --rates 500mbit 1gbit 10gbit \\
        --devices 4 8 --records lab/results/transfer-cpu/transfer_cpu.json \\
        --out lab/results/fabric-transfer/fabric_transfer.json \\
        > lab/results/fabric-transfer/fabric_transfer.txt

Needs root (namespaces, control groups).
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import asdict


def _records_by_rate(path: str | None) -> dict[tuple[str, int], float]:
    """(link rate, N) -> the records' median per-end figure (PS and worker ends together), ns."""
    if not path:
        return {}
    with open(path) as f:
        rows = json.load(f)["rows"]
    out: dict[tuple[str, int], list[float]] = {}
    for row in rows:
        if row["model"] in ("vgg11", "alexnet", "overfeat"):
            out.setdefault((row["bandwidth"], row["devices"]), []).extend(
                [row["ps_end_ns_per_byte"], row["worker_end_ns_per_byte"]])
    return {key: statistics.median(values) for key, values in out.items()}


def main() -> None:
    from lab.planner.fabric_transfer import measure_fabric_transfer
    from lab.planner.host import Host
    from lab.planner.host_calibration import HostCalibration
    from lab.planner.transfer import measure_transfer
    from ralp.emulation.budget import budget_for
    from ralp.planner.calibration import this_machine
    from ralp.units import parse_bandwidth

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", nargs="+", default=["500mbit", "1gbit", "10gbit"])
    p.add_argument("--devices", type=int, nargs="+", default=[4, 8])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--records", help="the budgeted records' figures "
                   "(lab/results/transfer-cpu/transfer_cpu.json)")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    _, loopback, _ = measure_transfer()
    seen = _records_by_rate(args.records)
    print(f"loopback probe (unshaped, one process): {loopback * 1e9 / 2:.2f} ns per byte, each end")
    print(f"{'link':>8} {'N':>3} {'CPU':>6} {'PS end':>7} {'worker':>7} {'records':>8} "
          f"{'step s':>7}  throttled (PS, worker)   (ns of CPU per byte, each end)")
    rows = []
    for n in args.devices:
        budget = budget_for("auto", n)
        curve = []
        for rate in args.rates:
            measured = measure_fabric_transfer(budget, parse_bandwidth(rate), args.steps)
            records = seen.get((rate, n))
            rows.append({"link": rate, "devices": n, "device_cpus": budget.cpus,
                         "records_end_ns": records, **asdict(measured)})
            print(f"{rate:>8} {n:>3} {budget.cpus:>6.3f} {measured.ps_cpu_s_per_byte * 1e9:>7.2f} "
                  f"{measured.worker_cpu_s_per_byte * 1e9:>7.2f} "
                  f"{'-' if records is None else f'{records:.2f}':>8} {measured.step_s:>7.2f}  "
                  f"{measured.throttled[0]:.2f}, {measured.throttled[1]:.2f}", flush=True)
            curve.append((float(measured.rate_bits), measured.cpu_s_per_byte))
        host = Host(False, device_cpus=budget.cpus, fabric_cpu_s_per_byte=tuple(sorted(curve)))
        HostCalibration(host, [], f"{this_machine()}, {budget.describe()}").save(
            args.out.removesuffix(".json") + f"_n{n}_calibration.json")
    with open(args.out, "w") as f:
        json.dump({"loopback_cpu_s_per_byte": loopback, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
