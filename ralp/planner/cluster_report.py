"""``python -m ralp.planner --nodes ...``: the plan for a real cluster, as a user acts on it.

It leads with one answer per setting (the mode, its layout, its images/s and how many times
the runner-up's and plain PS's), says "tie" where the runner-up lies inside the planner's
error band, then prints the table; ``--format json``, ``--csv``, ``--plot`` and ``--save``
give the same figures to scripts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ralp._cli import UsageError
from ralp.planner.cluster_plan import (
    NEEDS,
    TIE_BAND,
    ClusterPrediction,
    Decision,
    decide,
    device_compute,
    predict_mode,
)
from ralp.planner.modes import MODES, PlannerError
from ralp.planner.topology import PCIE3_X16_BITS, Topology
from ralp.planner.workload import Workload
from ralp.units import parse_bandwidth

CONFIG_FILE = "ralp_plan.json"
COMMAND_FILE = "cmd_optimal.txt"


@dataclass(frozen=True)
class ClusterPlan:
    model: str
    source: str  # the model file or zoo name the plan is for
    batch_size: int
    predictions: tuple[ClusterPrediction, ...]
    skipped: tuple[str, ...]  # a line per mode left out, with the reason

    def decisions(self) -> list[Decision]:
        settings: dict[tuple, list[ClusterPrediction]] = {}
        for p in self.predictions:
            settings.setdefault((p.bandwidth, p.nodes), []).append(p)
        return [decide(found) for found in settings.values()]

    def to_dict(self) -> dict:
        return {"model": self.model, "batch_size": self.batch_size, "tie_band": TIE_BAND,
                "predictions": [p.to_dict() for p in self.predictions],
                "best": [_decision_dict(d) for d in self.decisions()],
                "skipped": list(self.skipped)}


def _decision_dict(d: Decision) -> dict:
    return {**d.best.to_dict(), "tie": d.tie, "fastest": d.fastest.mode,
            "runner_up": d.runner_up.mode if d.runner_up else None,
            "vs_runner_up": (d.best.images_per_sec / d.runner_up.images_per_sec
                             if d.runner_up else None),
            "vs_ps": d.best.images_per_sec / d.ps.images_per_sec if d.ps else None}


def installed_horovod() -> str | None:
    """'nccl' or 'gloo' (the installed Horovod's GPU operations), None where not installed."""
    try:
        import horovod.tensorflow as hvd
    except ImportError:
        return None
    return "nccl" if hvd.nccl_built() else "gloo"


def plan_cluster(workload: Workload, images_per_sec: float | None, compute, *,
                 nodes: Sequence[int], gpus_per_node: int, bandwidths: Sequence[int],
                 intra_bits: float, modes: Sequence[str], sync: str,
                 horovod_build: str | None, source: str) -> ClusterPlan:
    """Every mode of ``modes`` on every (bandwidth, nodes), the device's compute from its
    measured ``images_per_sec`` or a calibration's ``compute``."""
    if compute is None:
        compute = device_compute(workload, images_per_sec)
    predictions, skipped = [], {}
    for bits in bandwidths:
        for k in nodes:
            topo = Topology(k, gpus_per_node, bits, intra_bits)
            for mode in modes:
                try:
                    predictions.append(predict_mode(workload, compute, topo, mode, sync=sync,
                                                    horovod_build=horovod_build))
                except PlannerError as e:
                    skipped.setdefault(mode, f"{mode}: {e}")
    if not predictions:
        raise PlannerError("no mode can run there: " + "; ".join(skipped.values()))
    return ClusterPlan(workload.profile.model, source, workload.table.batch_size,
                       tuple(predictions), tuple(skipped.values()))


def _rate(bits: float) -> str:
    return f"{bits / 1e9:g} Gbit/s" if bits >= 1e9 else f"{bits / 1e6:g} Mbit/s"


def layout_text(p: ClusterPrediction) -> str:
    if p.mode == "stanza":
        return f"{p.workers} CONV + {p.ps} FC ranks"
    if p.ps:
        return f"{p.workers} worker GPUs + {p.ps} PS"
    return f"{p.workers} GPUs in one ring"


def lead(plan: ClusterPlan) -> list[str]:
    lines = []
    for d in plan.decisions():
        b = d.best
        text = (f"{b.nodes} x {b.gpus_per_node} GPUs at {_rate(b.bandwidth)}: {b.mode} "
                f"({layout_text(b)}), {b.images_per_sec:,.0f} images/s")
        if d.fastest is not b:  # a tie went to the mode needing less
            text += (f"; tie with {d.fastest.mode} ({d.fastest.images_per_sec:,.0f} images/s, "
                     f"inside the planner's {TIE_BAND:.0%} error band), which needs "
                     f"{NEEDS[d.fastest.mode][1]}; {b.mode} needs {NEEDS[b.mode][1]}")
        elif d.runner_up is not None:
            text += (f", {b.images_per_sec / d.runner_up.images_per_sec:.2f}x the runner-up "
                     f"{d.runner_up.mode}" + (" (a tie: inside the planner's "
                                              f"{TIE_BAND:.0%} error band)" if d.tie else ""))
        if d.ps is not None and b.mode != "ps":
            text += f", {b.images_per_sec / d.ps.images_per_sec:.2f}x plain PS"
        lines.append(text)
        if b.note:
            lines.append(f"    {b.mode}: {b.note}")
    return lines


def to_text(plan: ClusterPlan, modes: Sequence[str]) -> str:
    lines = [f"{plan.model}, batch {plan.batch_size} per GPU:", *lead(plan), ""]
    head = f"{'NIC':>12} {'nodes':>5} {'GPUs':>5} " + " ".join(f"{m:>10}" for m in modes)
    lines += [head, "-" * len(head)]
    found = {(p.bandwidth, p.nodes, p.mode): p for p in plan.predictions}
    for d in plan.decisions():
        cells = [found.get((d.best.bandwidth, d.best.nodes, m)) for m in modes]
        lines.append(f"{_rate(d.best.bandwidth):>12} {d.best.nodes:>5} {d.best.devices:>5} "
                     + " ".join(f"{c.images_per_sec:>10,.0f}" if c else f"{'-':>10}"
                                for c in cells))
    lines += ["", "images/s predicted (docs/planner.md, 'A real cluster')", *plan.skipped]
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
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    rates = list(dict.fromkeys(p.bandwidth for p in plan.predictions))
    fig, axes = plt.subplots(1, len(rates), figsize=(5 * len(rates), 4), squeeze=False,
                             sharey=True)
    for ax, bits in zip(axes[0], rates, strict=True):
        for mode in MODES:
            pts = [(p.devices, p.images_per_sec) for p in plan.predictions
                   if p.bandwidth == bits and p.mode == mode]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", label=mode)
        ax.set(xscale="log", yscale="log", title=f"{plan.model}, NIC {_rate(bits)}",
               xlabel="GPUs")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("predicted images/s")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run_command(plan: ClusterPlan, p: ClusterPrediction) -> str:
    """How to run prediction ``p``: the bench's command on a running cluster and the
    ``ralp.wrap`` call of a training script (docs/clusters.md starts the tasks)."""
    model = (f"--keras-model {plan.source}" if plan.source.endswith(".keras")
             else f"--models {plan.source}")
    fc = f" --fc-workers {p.ps}" if p.mode == "stanza" else ""
    bench = (f"python -m ralp.bench --backend tf-config --cluster cluster.json {model} "
             f"--modes {p.mode} --devices {p.workers + (p.ps if p.mode != 'ps' else 0)}{fc} "
             f"--batch-size {plan.batch_size} --device-type gpu")
    wrap_mode = {"ralp-n": "ralp", "ralp-h": "ralp"}.get(p.mode, p.mode)
    extra = f", fc_workers={p.ps}" if p.mode == "stanza" else ""
    wrap = (f"trainer = ralp.wrap(model, cluster, mode={wrap_mode!r}, device_type='gpu'{extra})"
            f"  # {layout_text(p)}")
    return f"{bench}\n{wrap}"


def save(plan: ClusterPlan, folder: str) -> list[str]:
    """The chosen configuration per setting (JSON) and the commands that run it."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    decisions = plan.decisions()
    config = {"model": plan.model, "source": plan.source, "batch_size": plan.batch_size,
              "configurations": [_decision_dict(d) for d in decisions]}
    (out / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    commands = []
    for d in decisions:
        b = d.best
        commands += [f"# {b.nodes} x {b.gpus_per_node} GPUs at {_rate(b.bandwidth)}: {b.mode}",
                     run_command(plan, b), ""]
    (out / COMMAND_FILE).write_text("\n".join(commands))
    return [str(out / CONFIG_FILE), str(out / COMMAND_FILE)]


def cluster_cli(args, workload: Workload, source: str, compute) -> str:
    """The CLI's answer for ``--nodes``."""
    if args.device_throughput is None and compute is None:
        raise UsageError("a real cluster's device: give --device-throughput IMAGES_PER_S (one "
                         "GPU's training throughput at this batch, as you measured it) or "
                         "--compute-profile FILE (python -m ralp.planner --calibrate run on "
                         "one of your GPU hosts)")
    modes = args.modes or list(MODES)
    build = installed_horovod() if args.horovod_build == "installed" else (
        None if args.horovod_build == "none" else args.horovod_build)
    intra = (parse_bandwidth(args.intra_node_bandwidth) if args.intra_node_bandwidth
             else PCIE3_X16_BITS)
    plan = plan_cluster(workload, args.device_throughput, compute, nodes=args.nodes,
                        gpus_per_node=args.gpus_per_node,
                        bandwidths=[parse_bandwidth(b) for b in args.bandwidth],
                        intra_bits=intra, modes=modes, sync=args.sync,
                        horovod_build=build, source=source)
    notes = []
    if args.plot:
        plot(plan, args.plot)
    csv_path = args.csv or (str(Path(args.plot).with_suffix(".csv")) if args.plot else None)
    if csv_path:
        Path(csv_path).write_text(to_csv(plan))
    if args.save:
        notes = ["", "saved: " + ", ".join(save(plan, args.save))]
    if args.format == "json":
        return json.dumps(plan.to_dict(), indent=2)
    return to_text(plan, modes) + "\n".join(notes)
