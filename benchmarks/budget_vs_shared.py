"""Budgeted devices beside shared CPUs: two recorded runs of one zoo setting side by side
(issue 25 (b)).

Reads a run on budgeted devices (``--device-cpus auto``) and the same setting with
``--device-cpus shared``, both with ``--repeat``, and prints in Markdown:

- per model and mode, each run's median images/s [min-max over its rounds] and the median
  per-round ratio to plain PS, and the shared run's change against the budgeted one;
- the modes' order per model in each run, and where it differs;
- the CPU each role used (the records' ``cpu`` fields): the mean over rounds of each task's
  CPU, as the range over the role's tasks, and, budgeted, the share of 10 ms periods in which
  they were throttled. Roles: plain PS and RALP ``worker`` / ``ps``, Horovod ``rank``, Stanza
  ``conv`` ranks (its workers) and ``fc`` rank (its PS task).

    .venv/bin/python benchmarks/budget_vs_shared.py benchmarks/results/devices_zoo_n8_1gbit.json \\
        benchmarks/results/devices_zoo_n8_1gbit_shared.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ralp.bench.records import succeeded  # noqa: E402
from ralp.bench.rounds import summarize  # noqa: E402

MODES = ("ps", "ralp-h", "ralp-n", "horovod", "stanza")


def role(mode: str, task: str) -> str | None:
    job = task.split(":")[0]
    if job not in ("worker", "ps"):
        return None  # the chief or the Horovod driver: outside the budgets
    if mode == "stanza":
        return "conv" if job == "worker" else "fc"
    if mode == "horovod":
        return "rank"
    return job


def cpu_by_role(records: list[dict]) -> dict[tuple[str, str], dict[str, dict]]:
    """(model, mode) -> role -> {"used": (min, max), "throttled": (min, max) or None}: each
    task's mean over the rounds, then the range over the role's tasks."""
    per_task: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if succeeded(r) and isinstance(r.get("cpu"), dict):
            for task, figures in r["cpu"].get("tasks", {}).items():
                per_task[(r["model"], r["mode"])][task].append(figures)
    out: dict[tuple[str, str], dict[str, dict]] = {}
    for key, tasks in per_task.items():
        roles: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for task, rounds in tasks.items():
            name = role(key[1], task)
            if name is None:
                continue
            roles[name]["used"].append(mean(f["used_cpus"] for f in rounds))
            throttled = [f["throttled_share"] for f in rounds if "throttled_share" in f]
            if throttled:
                roles[name]["throttled"].append(mean(throttled))
        out[key] = {name: {k: (min(v), max(v)) for k, v in figures.items()}
                    for name, figures in roles.items()}
    return out


def _range(pair: tuple[float, float], spec: str) -> str:
    lo, hi = pair
    return f"{lo:{spec}}" if f"{lo:{spec}}" == f"{hi:{spec}}" else f"{lo:{spec}}-{hi:{spec}}"


def _cell(s: dict | None) -> str:
    if s is None or s.get("images_per_sec") is None:
        return "-"
    sp = s["images_per_sec_spread"]
    text = f"{sp['median']:.1f} [{sp['min']:.1f}-{sp['max']:.1f}]"
    if s["flagged"]:
        text += "!"
    if s["mode"] != "ps" and s.get("speedup_vs_ps") is not None:
        text += f", {s['speedup_vs_ps']:.2f}x"
    return text


def tables(budgeted: list[dict], shared: list[dict]) -> str:
    runs = {"budgeted": {(s["model"], s["mode"]): s for s in summarize(budgeted)},
            "shared": {(s["model"], s["mode"]): s for s in summarize(shared)}}
    models = list(dict.fromkeys(r["model"] for r in budgeted))
    lines = ["| model | CPUs | " + " | ".join(MODES) + " |", "|---|---|" + "---|" * len(MODES)]
    for model in models:
        for name, run in runs.items():
            cells = [_cell(run.get((model, m))) for m in MODES]
            lines.append(f"| {model} | {name} | " + " | ".join(cells) + " |")
    lines += ["", "Shared against budgeted (median images/s), and the modes' order:", ""]
    for model in models:
        change, orders = [], {}
        for m in MODES:
            b, s = runs["budgeted"].get((model, m)), runs["shared"].get((model, m))
            if b and s and b.get("images_per_sec") and s.get("images_per_sec"):
                change.append(f"{m} {s['images_per_sec'] / b['images_per_sec'] - 1:+.0%}")
        for name, run in runs.items():
            ranked = sorted((m for m in MODES if (run.get((model, m)) or {}).get("images_per_sec")),
                            key=lambda m, run=run: -run[(model, m)]["images_per_sec"])
            orders[name] = " > ".join(ranked)
        same = "same order" if orders["budgeted"] == orders["shared"] else (
            f"order budgeted {orders['budgeted']}; shared {orders['shared']}")
        lines.append(f"- {model}: " + ", ".join(change) + f"; {same}")
    return "\n".join(lines)


def cpu_lines(budgeted: list[dict], shared: list[dict]) -> str:
    b, s = cpu_by_role(budgeted), cpu_by_role(shared)
    budget = next((r["cpu"].get("budget_cpus") for r in budgeted
                   if isinstance(r.get("cpu"), dict)), None)
    lines = [f"CPU per task by role, budgeted ({budget} CPU per device): CPUs used, share of "
             "periods throttled (shared: CPUs used)", ""]
    for key in b:
        parts = []
        for name, figures in b[key].items():
            text = f"{name} {_range(figures['used'], '.2f')}"
            if "throttled" in figures:
                text += f" throttled {_range(figures['throttled'], '.0%')}"
            if name in s.get(key, {}):
                text += f" (shared {_range(s[key][name]['used'], '.2f')})"
            parts.append(text)
        lines.append(f"- {key[0]} {key[1]}: " + ", ".join(parts))
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("budgeted", help="records of the run on budgeted devices (JSON)")
    p.add_argument("shared", help="records of the same setting on shared CPUs (JSON)")
    args = p.parse_args()
    budgeted = json.loads(Path(args.budgeted).read_text())
    shared = json.loads(Path(args.shared).read_text())
    print(tables(budgeted, shared))
    print()
    print(cpu_lines(budgeted, shared))
    return 0


if __name__ == "__main__":
    sys.exit(main())
