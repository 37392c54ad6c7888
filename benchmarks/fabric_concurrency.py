"""Do k workers' transfers at once keep a PS task's link busy, and what do they cost its CPU?

    .venv/bin/python benchmarks/fabric_concurrency.py --bandwidth 500mbit 1gbit \\
        --workers 1 2 4 7 --out benchmarks/results/fabric_concurrency.json

The planner's PS modes (``ralp.planner.model``) serve the busiest PS link as a queue, each
direction apart, beside the PS device's CPU: a station each, as if the link kept its full
rate whatever the number of transfers through it and the PS's CPU per byte did not depend on
them. The budgeted sweep's PS-mode records never loaded a PS link beyond 0.67 of its rate,
yet the model over-predicted them by up to 29% at N = 8 and 500 Mbit/s. This measures both
assumptions without a model in the way.

k workers and one PS task, real ``tf.distribute.Server`` processes each in its own namespace
and control group of one budget (``--budget-devices``: the budget each task gets in a bench
run on that many devices), the links shaped at ``--bandwidth``. A coordinator in the chief's
namespace (outside the budgets) times three traced functions, interleaved ``--repeats``
times: every worker pulls the PS's ``--megabytes`` at once (k transfers out of the PS's link),
every worker pushes as many at once (k into it), and both at once (k each way, as pulls and
pushes of different workers meet in an asynchronous PS step). Per function: the median wall
time, the PS link's utilisation over it (bytes counted on the link / rate / wall; the pulls'
direction for ``both``), and the PS's CPU seconds per byte through its link (its group's
counters), its CPU over the wall as a share of its budget, and its share of periods
throttled. ``both / max(pulls, pushes)`` is 1 where the link carries both directions at once
and 2 where they take turns (``benchmarks/link_duplex.py`` measures it for one transfer each
way between unbudgeted tasks).

Needs root (namespaces, control groups); the machine should be quiet.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from ralp.emulation.budget import budget_for
from ralp.planner.fabric_transfer import run_on_budgeted_fabric
from ralp.units import parse_bandwidth

PS = "/job:ps/replica:0/task:0/device:CPU:0"
DIRECTIONS = ("pulls", "pushes", "both")


def _worker(i: int) -> str:
    return f"/job:worker/replica:0/task:{i}/device:CPU:0"


def _timed(spec: dict, workers: int, megabytes: int, repeats: int, meter, read_links) -> dict:
    """In the coordinator: all workers' pulls at once, then all their pushes at once,
    ``repeats`` times; each timed with the PS's CPU and its link's bytes around it."""
    import tensorflow as tf

    tf.config.experimental_connect_to_cluster(tf.train.ClusterSpec(spec), job_name="chief")
    floats = megabytes * 2**20 // 4
    with tf.device(PS):
        on_ps = tf.Variable(tf.zeros([floats]))
        ps_sinks = [tf.Variable(tf.zeros([floats])) for _ in range(workers)]
    sinks, sources = [], []
    for i in range(workers):
        with tf.device(_worker(i)):
            sinks.append(tf.Variable(tf.zeros([floats])))
            sources.append(tf.Variable(tf.ones([floats])))

    @tf.function
    def pulls():  # no dependency between the workers' copies: they run at once
        for i in range(workers):
            with tf.device(_worker(i)):
                sinks[i].assign(on_ps)
        return tf.constant(0)

    @tf.function
    def pushes():
        with tf.device(PS):
            for i in range(workers):
                ps_sinks[i].assign(sources[i])
        return tf.constant(0)

    @tf.function
    def both():  # every worker's pull and push at once: k transfers each way
        for i in range(workers):
            with tf.device(_worker(i)):
                sinks[i].assign(on_ps)
        with tf.device(PS):
            for i in range(workers):
                ps_sinks[i].assign(sources[i])
        return tf.constant(0)

    copies = {"pulls": pulls, "pushes": pushes, "both": both}
    for fn in copies.values():
        fn().numpy()  # trace and warm up (TCP's windows too)
    out: dict[str, dict[str, list[float]]] = {
        name: {"wall_s": [], "ps_cpu_s": [], "ps_bytes": [], "ps_one_way": [], "throttled": []}
        for name in copies}
    for _ in range(repeats):
        for name, fn in copies.items():
            cpu_before, links_before = meter(), read_links()
            start = time.perf_counter()
            fn().numpy()
            wall = time.perf_counter() - start
            cpu_after, links_after = meter(), read_links()
            a, b = cpu_before.tasks["ps:0"], cpu_after.tasks["ps:0"]
            periods = b.periods - a.periods
            row = out[name]
            row["wall_s"].append(wall)
            row["ps_cpu_s"].append(b.used_s - a.used_s)
            after, before = links_after["ps:0"], links_before["ps:0"]
            row["ps_bytes"].append(after.total - before.total)
            # the direction the copies load: out of the PS for pulls, into it for pushes
            row["ps_one_way"].append(after.rx - before.rx if name == "pushes"
                                     else after.tx - before.tx)
            row["throttled"].append((b.throttled - a.throttled) / periods if periods else 0.0)
    return out


def measure(bandwidth: str, workers: int, megabytes: int, repeats: int,
            budget_devices: int) -> dict:
    """One (rate, k) row: per direction, medians over the repeats."""
    budget = budget_for("auto", budget_devices)
    if budget.hierarchy is None or budget.cpus is None:
        raise SystemExit(f"needs budgeted devices: {budget.describe()}")
    raw = run_on_budgeted_fabric(budget, workers, bandwidth, _timed, workers, megabytes,
                                 repeats, timeout=900)
    rate = parse_bandwidth(bandwidth) / 8
    row = {"bandwidth": bandwidth, "workers": workers, "megabytes": megabytes,
           "budget_cpus": budget.cpus, "wire_s": workers * megabytes * 2**20 / rate}
    for name, r in raw.items():
        walls = r["wall_s"]
        util = [b / rate / w for b, w in zip(r["ps_one_way"], walls, strict=True)]
        row[name] = {"wall_s": statistics.median(walls), "wall_range_s": [min(walls), max(walls)],
                     "link_utilisation": statistics.median(util),
                     "ps_ns_per_byte": 1e9 * sum(r["ps_cpu_s"]) / sum(r["ps_bytes"]),
                     "ps_cpu_share": statistics.median(
                         c / w / budget.cpus for c, w in zip(r["ps_cpu_s"], walls, strict=True)),
                     "throttled": statistics.median(r["throttled"])}
    row["both_over_one"] = row["both"]["wall_s"] / max(row["pulls"]["wall_s"],
                                                       row["pushes"]["wall_s"])
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bandwidth", nargs="+", default=["500mbit", "1gbit"])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 7])
    p.add_argument("--megabytes", type=int, default=32, help="per worker and direction")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--budget-devices", type=int, default=8)
    p.add_argument("--out")
    args = p.parse_args(argv)
    rows = []
    print(f"{'rate':>8} {'k':>2} {'wire s':>6} | " + " | ".join(
        f"{d + ' s':>8} {'util':>4} {'ns/B':>5} {'busy':>4} {'thr':>4}"
        for d in DIRECTIONS) + f" | {'both/one':>8}")
    for bandwidth in args.bandwidth:
        for k in args.workers:
            row = measure(bandwidth, k, args.megabytes, args.repeats, args.budget_devices)
            cells = [f"{row[d]['wall_s']:8.2f} {row[d]['link_utilisation']:4.2f} "
                     f"{row[d]['ps_ns_per_byte']:5.2f} {row[d]['ps_cpu_share']:4.2f} "
                     f"{row[d]['throttled']:4.2f}" for d in DIRECTIONS]
            print(f"{bandwidth:>8} {k:2d} {row['wire_s']:6.2f} | " + " | ".join(cells)
                  + f" | {row['both_over_one']:8.2f}", flush=True)
            rows.append(row)
    if args.out:
        command = ("benchmarks/fabric_concurrency.py --bandwidth " + " ".join(args.bandwidth)
                   + " --workers " + " ".join(map(str, args.workers))
                   + f" --megabytes {args.megabytes} --repeats {args.repeats}"
                   + f" --budget-devices {args.budget_devices}")
        with open(args.out, "w") as f:
            json.dump({"command": command, "rows": rows}, f, indent=1)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
