"""``python -m ralp.planner --nodes ...``: the plan for a real cluster, as a user acts on it.

It leads with one answer per setting (the mode, its layout, its images/s and how many times
the runner-up's and plain PS's), says "tie" where the runner-up lies inside the planner's
decision margin, then prints the table; ``--format json``, ``--csv``, ``--plot`` and ``--save``
give the same figures to scripts."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from ralp import modes as registry
from ralp._cli import UsageError
from ralp.models.model_file import bench_model_argument
from ralp.planner.cluster_plan import (
    DECISION_MARGIN,
    MIN_BYTES_SAVED,
    NEEDS,
    ClusterPlan,
    ClusterPrediction,
    decision_dict,
    installed_horovod,
    plan_cluster,
    scale_compute,
)
from ralp.planner.modes import MODES
from ralp.planner.topology import PCIE3_X16_BITS
from ralp.planner.workload import Workload
from ralp.units import parse_bandwidth

CONFIG_FILE = "ralp_plan.json"
COMMAND_FILE = "cmd_optimal.txt"
# How far a compute time measured in a few steps on a busy machine may be off: a plan from
# measured compute checks whether its answer survives this much (docs/explanation/cost-model.md).
MEASURED_NOISE = 0.10


def _rate(bits: float) -> str:
    return f"{bits / 1e9:g} Gbit/s" if bits >= 1e9 else f"{bits / 1e6:g} Mbit/s"


def layout_text(p: ClusterPrediction, unit: str = "GPUs") -> str:
    if registry.MODES[p.mode].family == registry.LAYER_SPLIT:
        return f"{p.workers} CONV + {p.ps} FC ranks"
    if p.ps:
        return f"{p.workers} worker {unit} + {p.ps} PS"
    return f"{p.workers} {unit} in one ring"


def _where(plan: ClusterPlan, p: ClusterPrediction) -> str:
    if not plan.on_gpus:
        return f"{p.nodes} devices at {_rate(p.bandwidth)}"
    return f"{p.nodes} x {p.gpus_per_node} GPUs at {_rate(p.bandwidth)}"


def close_calls(plan: ClusterPlan, replan) -> dict[tuple[int, int], set[str]]:
    """Per setting, the modes the answer would become if the measured compute were off by
    :data:`MEASURED_NOISE` (whole model and tail each up or down): where any, the answer is
    a close call that the measurement's noise can flip. ``replan(compute_scale, tail_scale)``
    plans again with the compute scaled."""
    chosen = {(d.best.bandwidth, d.best.nodes): d.best.mode for d in plan.decisions()}
    flips: dict[tuple[int, int], set[str]] = {}
    for full in (1 - MEASURED_NOISE, 1 + MEASURED_NOISE):
        for tail in (1 - MEASURED_NOISE, 1 + MEASURED_NOISE):
            for d in replan(full, tail).decisions():
                key = (d.best.bandwidth, d.best.nodes)
                if d.best.mode != chosen.get(key):
                    flips.setdefault(key, set()).add(d.best.mode)
    return flips


def lead(plan: ClusterPlan, flips: dict | None = None) -> list[str]:
    lines = []
    for d in plan.decisions():
        b = d.best
        unit = "GPUs" if plan.on_gpus else "devices"
        text = (f"{_where(plan, b)}: {b.mode} ({layout_text(b, unit)}), "
                f"{b.images_per_sec:,.0f} images/s")
        if d.fastest is not b:
            text += _passed_over(d)
        elif d.runner_up is not None:
            text += (f", {b.images_per_sec / d.runner_up.images_per_sec:.2f}x the runner-up "
                     f"{d.runner_up.mode}" + (" (a tie: inside the planner's "
                                              f"{DECISION_MARGIN:.0%} decision margin)"
                                              if d.tie else ""))
        if d.ps is not None and b.mode != registry.PS:
            text += f", {b.images_per_sec / d.ps.images_per_sec:.2f}x plain PS"
        lines.append(text)
        if b.note:
            lines.append(f"    {b.mode}: {b.note}")
        others = (flips or {}).get((b.bandwidth, b.nodes))
        if others:
            lines.append(f"    close call: with the measured compute {MEASURED_NOISE:.0%} off, "
                         f"{' or '.join(sorted(others))} would be chosen; measure it with "
                         "more steps (--calibrate --steps 30) and plan from that calibration")
    return lines


def _passed_over(d) -> str:
    """Why the fastest prediction is not the answer: a tie went to the mode needing less, or
    a RALP mode saves too few bytes to count."""
    f, b = d.fastest, d.best
    if f.images_per_sec > (1 + DECISION_MARGIN) * b.images_per_sec:
        return (f"; {f.mode} is predicted faster ({f.images_per_sec:,.0f} images/s) but does "
                f"not move {MIN_BYTES_SAVED:.0%} fewer bytes per image than plain PS")
    return (f"; tie with {f.mode} ({f.images_per_sec:,.0f} images/s, inside the planner's "
            f"{DECISION_MARGIN:.0%} decision margin), which needs {NEEDS[f.mode][1]}; "
            f"{b.mode} needs {NEEDS[b.mode][1]}")


def to_text(plan: ClusterPlan, modes: Sequence[str], flips: dict | None = None) -> str:
    unit = "GPU" if plan.on_gpus else "device"
    lines = [f"{plan.model}, batch {plan.batch_size} per {unit}:", *lead(plan, flips), "",
             f"skewness rule: {plan.skewness_verdict}", ""]
    head = f"{'NIC':>12} {'nodes':>5} {'GPUs':>5} " + " ".join(f"{m:>10}" for m in modes)
    lines += [head, "-" * len(head)]
    found = {(p.bandwidth, p.nodes, p.mode): p for p in plan.predictions}
    for d in plan.decisions():
        cells = [found.get((d.best.bandwidth, d.best.nodes, m)) for m in modes]
        lines.append(f"{_rate(d.best.bandwidth):>12} {d.best.nodes:>5} {d.best.devices:>5} "
                     + " ".join(f"{c.images_per_sec:>10,.0f}" if c else f"{'-':>10}"
                                for c in cells))
    lines += ["", "images/s predicted (docs/explanation/cost-model.md)", *plan.skipped]
    return "\n".join(lines)


def to_csv(plan: ClusterPlan) -> str:
    import csv
    import io

    buffer = io.StringIO()
    fields = list(ClusterPrediction.__dataclass_fields__)
    writer = csv.DictWriter(buffer, ["model", "batch_size", *fields, "best"])
    writer.writeheader()
    chosen = {(d.best.bandwidth, d.best.nodes): d.best.mode for d in plan.decisions()}
    for p in plan.predictions:
        writer.writerow({"model": plan.model, "batch_size": plan.batch_size, **p.to_dict(),
                         "best": chosen[(p.bandwidth, p.nodes)] == p.mode})
    return buffer.getvalue()


def plot(plan: ClusterPlan, path: str) -> None:
    """Predicted images/s against GPUs, one panel per NIC rate, one line per mode."""
    from ralp.planner.curves import draw

    draw(((p.bandwidth, p.mode, p.devices, p.images_per_sec) for p in plan.predictions),
         MODES, lambda bits: f"{plan.model}, NIC {_rate(bits)}", "GPUs", path)


def run_command(plan: ClusterPlan, p: ClusterPrediction) -> str:
    """How to run prediction ``p``: the bench's command on a running cluster and the
    ``ralp.wrap`` call of a training script (docs/how-to/real-cluster.md starts the tasks)."""
    model = bench_model_argument(plan.source)
    split = registry.MODES[p.mode].family == registry.LAYER_SPLIT
    fc = f" --fc-workers {p.ps}" if split else ""
    bench = (f"python -m ralp.bench --backend tf-config --cluster cluster.json {model} "
             f"--modes {p.mode} --devices {p.workers + (p.ps if p.mode != registry.PS else 0)}{fc} "
             f"--batch-size {plan.batch_size}" + (" --device-type gpu" if plan.on_gpus else ""))
    wrap_mode = registry.MODES[p.mode].wrap_as
    extra = f", fc_workers={p.ps}" if split else ""
    gpu = ", device_type='gpu'" if plan.on_gpus else ""
    wrap = (f"trainer = ralp.wrap(model, cluster, mode={wrap_mode!r}{gpu}{extra})"
            f"  # {layout_text(p)}")
    return f"{bench}\n{wrap}"


def save(plan: ClusterPlan, folder: str) -> list[str]:
    """The chosen configuration per setting (JSON) and the commands that run it."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    decisions = plan.decisions()
    config = {"model": plan.model, "source": plan.source, "batch_size": plan.batch_size,
              "configurations": [decision_dict(d) for d in decisions]}
    (out / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    commands = []
    for d in decisions:
        b = d.best
        commands += [f"# {_where(plan, b)}: {b.mode}", run_command(plan, b), ""]
    (out / COMMAND_FILE).write_text("\n".join(commands))
    return [str(out / CONFIG_FILE), str(out / COMMAND_FILE)]


def cluster_answer(args, workload: Workload, source: str, compute,
                nodes: Sequence[int] | None = None) -> str:
    """The CLI's answer for ``--nodes`` (``nodes``: those, for ``--devices`` on a real
    cluster of one device per machine)."""
    if args.device_throughput is None and compute is None:
        raise UsageError("a real cluster's device: give --device-throughput IMAGES_PER_S (one "
                         "GPU's training throughput at this batch, as you measured it) or "
                         "--compute-profile FILE (python -m ralp.planner --calibrate run on "
                         "one of your GPU hosts)")
    modes = args.modes or list(MODES)
    on_gpus = nodes is None
    build = installed_horovod() if args.horovod_build == "installed" else (
        None if args.horovod_build == "none" else args.horovod_build)
    intra = (parse_bandwidth(args.intra_node_bandwidth) if args.intra_node_bandwidth
             else PCIE3_X16_BITS if on_gpus else math.inf)
    bandwidths = [parse_bandwidth(b) for b in args.bandwidth]

    def replan(full: float = 1.0, tail: float = 1.0) -> ClusterPlan:
        scaled = None if compute is None else scale_compute(compute, full, tail)
        return plan_cluster(workload, args.device_throughput, scaled,
                            nodes=nodes or args.nodes, gpus_per_node=args.gpus_per_node,
                            bandwidths=bandwidths,
                            intra_bits=intra, modes=modes, sync=args.sync,
                            horovod_build=build, source=source, on_gpus=on_gpus)

    plan = replan()
    flips = close_calls(plan, replan) if compute is not None else {}
    notes = []
    if args.plot:
        plot(plan, args.plot)
    csv_path = args.csv or (str(Path(args.plot).with_suffix(".csv")) if args.plot else None)
    if csv_path:
        Path(csv_path).write_text(to_csv(plan))
    if args.save:
        notes = ["", "saved: " + ", ".join(save(plan, args.save))]
    if args.format == "json":
        out = plan.to_dict()
        for best in out["best"]:
            best["close_call"] = sorted(flips.get((best["bandwidth"], best["nodes"]), ()))
        return json.dumps(out, indent=2)
    return to_text(plan, modes, flips) + "\n".join(notes)
