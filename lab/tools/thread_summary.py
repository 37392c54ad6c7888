"""Sum up lab/tools/thread_cpu.py's samples of an A/B run (lab/tools/ab_commits.sh): per run
of the bench, the CPU each kind of thread used on the devices, per worker batch, beside the
bench's own CPU per worker batch over its measured window; then each side's medians.

    .venv/bin/python -m lab.tools.thread_summary THREADS.json AB_PREFIX
    .venv/bin/python -m lab.tools.thread_summary THREADS.json BENCH.json   (one bench's runs)

A run is one bench record: its devices' groups (hosts ``w0``, ``w1``, ...) under one prefix,
in the order the runs began (the rounds' files in the order ab_commits.sh runs them: before 1,
after 1, before 2, ...). A kind's CPU per worker batch is all it used over the run (start-up
and warm-up included) over the run's worker batches (warm-up included); Horovod's threads
(kind ``python``) do next to nothing before the first step, so theirs is what the steps cost
them.
"""

from __future__ import annotations

import argparse
import json
import re
from statistics import median

from lab.tools.ab_summary import SIDES, cpu_per_batch
from lab.tools.thread_cpu import KINDS


def runs(samples: list[dict]) -> list[dict[str, float]]:
    """Per run (devices' groups under one prefix), in the order they appeared: each kind's
    CPU seconds, summed over the devices, at the run's last sample."""
    order: list[str] = []
    last: dict[str, dict[str, dict[str, float]]] = {}
    for sample in samples:
        for group, kinds in sample["groups"].items():
            prefix, host = group.split("/", 1)
            if not re.fullmatch(r"(w|ps)\d+", host):
                continue  # a probe's, a driver's or a chief's group, not a device of a run
            if prefix not in last:
                order.append(prefix)
                last[prefix] = {}
            last[prefix][host] = kinds
    return [{"prefix": p, **{k: sum(h[k] for h in last[p].values()) for k in KINDS}}
            for p in order]


def names_of(threads: dict, prefix: str, hosts: str | None = None) -> dict[str, float]:
    """A run's CPU seconds by thread name, summed over its devices (``hosts``: only those
    whose name starts so, e.g. ``ps``)."""
    out: dict[str, float] = {}
    for group, readings in threads.items():
        group_prefix, host = group.split("/", 1)
        if group_prefix != prefix or not re.fullmatch(r"(w|ps)\d+", host) or (
                hosts and not host.startswith(hosts)):
            continue
        for reading in readings.values():  # (kind, cpu, name); files before names: no name
            name = reading[2] if len(reading) > 2 else reading[0]
            out[name] = out.get(name, 0.0) + reading[1]
    return out


def ordered_records(prefix: str, rounds: int) -> list[tuple[str, int, dict]]:
    """``(side, round, record)`` in the order ab_commits.sh ran them; for one bench's output
    (``prefix`` a JSON file), its records in order, each its mode as its side."""
    if prefix.endswith(".json"):
        with open(prefix) as f:
            return [(r["mode"], 1, r) for r in json.load(f)]
    out = []
    for k in range(1, rounds + 1):
        for side in SIDES:
            with open(f"{prefix}_{side}_{k}.json") as f:
                out += [(side, k, r) for r in json.load(f)]
    return out


def table(threads_path: str, prefix: str, rounds: int, names: int = 0) -> str:
    with open(threads_path) as f:
        data = json.load(f)
    found = runs(data["samples"])
    records = ordered_records(prefix, rounds)
    if len(found) != len(records):
        raise SystemExit(f"thread_summary: {len(found)} runs sampled, {len(records)} records")
    lines = [f"{'model':<11} {'side':<7} {'round':>5}  bench CPU s/batch  "
             + "  ".join(f"{k:>7}" for k in KINDS) + "  (CPU s per worker batch, whole run)"]
    per: dict[tuple[str, str], list[dict[str, float]]] = {}
    for (side, k, record), kinds in zip(records, found, strict=True):
        batches = record["workers"] * (record["steps"] + record["warmup"])
        row = {k: kinds[k] / batches for k in KINDS}
        row["bench"] = cpu_per_batch(record) or float("nan")
        per.setdefault((record["model"], side), []).append(row)
        lines.append(f"{record['model']:<11} {side:<7} {k:>5}  "
                     f"{row['bench']:>17.3f}  " + "  ".join(f"{row[k]:>7.3f}" for k in KINDS))
    lines += ["", "medians over rounds:"]
    for (model, side), rows in per.items():
        lines.append(f"{model:<11} {side:<7} {'':>5}  {median(r['bench'] for r in rows):>17.3f}  "
                     + "  ".join(f"{median(r[k] for r in rows):>7.3f}" for k in KINDS))
    if names:
        lines += ["", f"each run's {names} busiest thread names, CPU s per worker batch "
                  "(workers' devices; PS tasks' apart):"]
        for (side, k, record), kinds in zip(records, found, strict=True):
            batches = record["workers"] * (record["steps"] + record["warmup"])
            for hosts in ("w", "ps"):
                busiest = sorted(names_of(data["threads"], kinds["prefix"], hosts).items(),
                                 key=lambda kv: -kv[1])[:names]
                if busiest:
                    lines.append(f"{record['model']:<11} {side:<7} {k:>5} {hosts:<3} " + ", ".join(
                        f"{n} {v / batches:.3f}" for n, v in busiest))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m lab.tools.thread_summary", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("threads", help="lab/tools/thread_cpu.py's JSON")
    p.add_argument("prefix", help="the A/B run's OUT_PREFIX, or one bench's JSON")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--names", type=int, default=0,
                   help="also each run's busiest thread names (this many)")
    args = p.parse_args(argv)
    print(table(args.threads, args.prefix, args.rounds, args.names))


if __name__ == "__main__":
    main()
