"""Does a simulated link carry gRPC transfers in both directions at once?

    .venv/bin/python benchmarks/link_duplex.py --bandwidth 250mbit 1gbit 10gbit \\
        --out benchmarks/results/link_duplex.json

One worker and one PS task, each in its own namespace on the netns fabric (``tbf`` on both
ends of every link), and a coordinator in the chief's namespace. Three traced functions copy a
variable of ``--megabytes`` across the worker's link: a pull (PS to worker), a push (worker to
PS), and both at once in one function, as a PS step's reads and another worker's writes meet
on a PS link. Each is timed ``--repeats`` times, interleaved; medians are reported with the
wire time of one direction at the link's rate.

``both / max(pull, push)`` is about 1 on a full-duplex link and about 2 where the directions
take turns. The planner's PS link model (``ralp.planner.model._link_stations``) rests on it.
Needs root (namespaces); the machine should be quiet.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from ralp.cluster.fresh_process import run_in_fresh_process
from ralp.cluster.netns_cluster import NetnsCluster
from ralp.units import parse_bandwidth

WORKER = "/job:worker/replica:0/task:0/device:CPU:0"
PS = "/job:ps/replica:0/task:0/device:CPU:0"


def _timed_copies(spec: dict, megabytes: int, repeats: int) -> dict[str, list[float]]:
    """In the coordinator: the pull, the push and both at once, ``repeats`` times each."""
    import tensorflow as tf

    tf.config.experimental_connect_to_cluster(tf.train.ClusterSpec(spec), job_name="chief")
    floats = megabytes * 2**20 // 4
    with tf.device(PS):
        on_ps, ps_sink = tf.Variable(tf.zeros([floats])), tf.Variable(tf.zeros([floats]))
    with tf.device(WORKER):
        on_worker, worker_sink = tf.Variable(tf.ones([floats])), tf.Variable(tf.zeros([floats]))

    @tf.function
    def pull():
        with tf.device(WORKER):
            worker_sink.assign(on_ps)
        return tf.constant(0)

    @tf.function
    def push():
        with tf.device(PS):
            ps_sink.assign(on_worker)
        return tf.constant(0)

    @tf.function
    def both():  # no dependency between the two: they run at once
        with tf.device(WORKER):
            worker_sink.assign(on_ps)
        with tf.device(PS):
            ps_sink.assign(on_worker)
        return tf.constant(0)

    copies = {"pull": pull, "push": push, "both": both}
    for fn in copies.values():
        fn().numpy()  # trace and warm up
    times: dict[str, list[float]] = {name: [] for name in copies}
    for _ in range(repeats):
        for name, fn in copies.items():
            start = time.perf_counter()
            fn().numpy()
            times[name].append(time.perf_counter() - start)
    return times


def measure(bandwidth: str, megabytes: int, repeats: int) -> dict:
    """One link rate's row: medians, their spread, the one-way wire time and the ratio."""
    with NetnsCluster(1, 1, bandwidth=bandwidth) as cluster:
        s = cluster.spec
        spec = {"chief": [s.chief], "worker": list(s.workers), "ps": list(s.ps)}
        times = run_in_fresh_process(_timed_copies, spec, megabytes, repeats,
                                     netns=cluster.chief_namespace, timeout=900)
    med = {name: statistics.median(t) for name, t in times.items()}
    return {"bandwidth": bandwidth, "megabytes": megabytes, "repeats": repeats,
            "median_s": med, "range_s": {n: [min(t), max(t)] for n, t in times.items()},
            "wire_one_way_s": megabytes * 2**20 * 8 / parse_bandwidth(bandwidth),
            "both_over_one": med["both"] / max(med["pull"], med["push"])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bandwidth", nargs="+", default=["250mbit", "1gbit", "10gbit"])
    p.add_argument("--megabytes", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out")
    args = p.parse_args(argv)
    rows = []
    print(f"{'rate':>8} {'pull s':>7} {'push s':>7} {'both s':>7} {'wire s':>7} {'both/one':>9}")
    for bandwidth in args.bandwidth:
        row = measure(bandwidth, args.megabytes, args.repeats)
        m = row["median_s"]
        print(f"{bandwidth:>8} {m['pull']:7.3f} {m['push']:7.3f} {m['both']:7.3f} "
              f"{row['wire_one_way_s']:7.3f} {row['both_over_one']:9.2f}")
        rows.append(row)
    if args.out:
        command = ("benchmarks/link_duplex.py --bandwidth " + " ".join(args.bandwidth)
                   + f" --megabytes {args.megabytes} --repeats {args.repeats}")
        with open(args.out, "w") as f:
            json.dump({"command": command, "rows": rows}, f, indent=1)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
