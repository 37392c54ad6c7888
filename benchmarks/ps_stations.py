"""The PS modes' stations, predicted beside what the budgeted records measured (no run).

    .venv/bin/python benchmarks/ps_stations.py > benchmarks/results/ps_stations_sweep.txt

For every PS-mode setting (ps, ralp-h, ralp-n) of the budgeted sweep (N = 4 and 8 at 1 Gbit/s
and 500 Mbit/s), the planner's step time and the demands of its stations per worker batch
(``ralp.planner.model``: a worker's device, the busiest PS task's device, the busiest PS link's
two directions) beside the records' own figures, medians over each setting's rounds:

- ``step``: seconds per worker batch (workers x batch / images/s), measured and predicted,
  and the prediction's error in images/s (as the validation counts it);
- ``worker dev`` / ``PS dev``: device seconds per worker batch, from the control groups' CPU
  (CPU seconds / budget; a PS task serves all workers, so its figure is divided by them);
- ``own link`` / ``PS link``: one direction of a worker's link, and of the busiest PS link
  (its share per worker batch: the station's demand), at the rate, from the byte model (all
  the variables a worker pulls pass its own link, from every PS task);
- ``PS link``: the busiest PS link's utilisation, the busier direction (bytes counted / rate /
  measured window).

The predictions use the same calibrations and lent fabric figures as
``benchmarks/results/devices_sweep_validation_fabric.txt``.
"""

from __future__ import annotations

import statistics
import sys

RESULTS = "benchmarks/results/"
SWEEP = ["devices_zoo_1gbit_again.json", "devices_zoo_n8_1gbit.json",
         "devices_zoo_500mbit.json", "devices_zoo_n8_500mbit.json"]
LENT = ["fabric_transfer_n4_calibration.json", "fabric_transfer_n8_calibration.json"]
PS_MODES = ("ps", "ralp-h", "ralp-n")


def measured(record: dict) -> dict:
    """One record's device seconds per worker batch and its busiest PS link's utilisation."""
    from ralp.units import parse_bandwidth

    cpu, step = record["cpu"], record["step_time_s"]
    tasks = cpu["tasks"]
    worker = statistics.mean(v["used_cpus"] for k, v in tasks.items() if k.startswith("worker"))
    ps = max(v["used_cpus"] for k, v in tasks.items() if k.startswith("ps"))
    link = record["links"][record["busiest_link"]]
    rate = parse_bandwidth(record["bandwidth"]) / 8
    return {"worker_dev": worker * step / cpu["budget_cpus"],
            "ps_dev": ps * step / cpu["budget_cpus"] / record["workers"],
            "ps_link": max(link["tx"], link["rx"]) / rate / cpu["wall_s"]}


def main() -> int:
    import ralp.planner.model as model
    from ralp.planner import repeats, validate
    from ralp.planner.calibration import Calibration
    from ralp.planner.cli import _zoo_workload
    from ralp.units import parse_bandwidth

    lent = [Calibration.load(RESULTS + p).host for p in LENT]
    records = [r for path in SWEEP for _, r in validate.load_records([RESULTS + path])
               if repeats.budgeted(r) and r["mode"] in PS_MODES]
    seen: list = []
    solve = model.mva_cycle_time

    def watched(stations, customers):  # the stations the prediction solves
        seen.append(stations)
        return solve(stations, customers)

    model.mva_cycle_time = watched
    print(f"{'model':10} {'N':>2} {'link':>7} {'mode':7} {'W':>2} | {'step s':>5} {'pred':>5} "
          f"{'err':>5} | {'worker dev':>10} {'pred':>5} | {'PS dev':>6} {'pred':>5} | "
          f"{'own link':>8} {'PS link':>7} | {'PS link util':>12} {'pred':>5}")
    try:
        for by_mode in repeats.settings_of(records).values():
            for mode, setting in by_mode.items():
                own = next((r for r in setting.records if r.get("calibration")),
                           setting.records[0])
                predicted = validate.predict_record(own, None, _zoo_workload,
                                                    validate.lent_for(own, lent))
                demand = {s.name: s.demand_s for s in seen[-1]}
                W, batch = own["workers"], own["batch_size"]
                rate = parse_bandwidth(own["bandwidth"]) / 8
                links = _zoo_workload(own["model"], batch, own["image_size"],
                                      own["num_classes"]).links_on(mode, W, own["ps"])
                got = [measured(r) for r in setting.records]
                m = {k: statistics.median(g[k] for g in got) for k in got[0]}
                step, step_pred = W * batch / setting.median, W * batch / predicted
                link_pred = max(demand["busiest PS link in"], demand["busiest PS link out"])
                print(f"{own['model']:10} {own['devices']:2d} {own['bandwidth']:>7} {mode:7} "
                      f"{W:2d} | {step:5.2f} {step_pred:5.2f} {step / step_pred - 1:+5.0%} | "
                      f"{m['worker_dev']:10.2f} {demand['worker device']:5.2f} | "
                      f"{m['ps_dev']:6.2f} {demand['busiest PS device']:5.2f} | "
                      f"{links.worker_tx / rate:8.2f} {link_pred:7.2f} | "
                      f"{m['ps_link']:12.2f} {W * link_pred / step_pred:5.2f}")
    finally:
        model.mva_cycle_time = solve
    return 0


if __name__ == "__main__":
    sys.exit(main())
