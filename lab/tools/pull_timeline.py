"""When does each pull arrive, and when does the layer that needs it start?

Trains a zoo model in plain PS mode on a simulated cluster (netns, shaped links), traces worker
0 with tf.profiler for a few steps, and reports for one traced step of each pull schedule:
every pull (receive) with its start and arrival relative to the step's start, each layer's
first forward op, the step time and the share of pull time hidden behind compute. Writes JSON
and a picture (one row per layer: its pulls as bars, its first forward op as a tick).

    .venv/bin/python -m lab.tools.pull_timeline --model vgg11 --image-size 64 --workers 2 \\
        --ps 2 --bandwidth 1gbit --schedules default ibatch layer \\
        --out lab/results/pull-timeline/pull_timeline.json \\
        --plot lab/results/pull-timeline/pull_timeline.png
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def traced_steps(spec, profiler_address: str, model_name: str, image: int, batch: int,
                 schedule: str, seconds: float) -> dict:
    """In the coordinator: place, warm up, trace worker 0 while training goes on."""
    import keras

    import ralp
    from ralp.audit.timeline import length, trace_while_training
    from ralp.models.synthetic import synthetic_dataset_fn

    keras.utils.set_random_seed(0)
    model = ralp.build_model(model_name, image_size=image)
    names = [layer.name for layer in model.layers]
    trainer = ralp.wrap(model, spec, mode="ps", optimizer=keras.optimizers.SGD(1e-3),
                        batch_size=batch, pull_schedule=schedule)
    data = synthetic_dataset_fn(image, batch, 1000)
    workers = trainer.runtime.workers
    trainer.fit(data, steps_per_epoch=2 * workers, batch_size=batch, verbose=0)
    steps = trace_while_training(trainer, data, batch, profiler_address, seconds, names)
    if not steps:
        raise RuntimeError("no complete step in the trace: trace for longer (--seconds)")
    step = sorted(steps, key=lambda s: s.seconds)[len(steps) // 2]  # the median step
    return {
        "schedule": schedule,
        "plan": str(trainer.plan),
        "predicted_pull_and_forward_s": trainer.runtime.pull_choice.predicted_s
        if trainer.runtime.pull_choice else None,
        "steps_traced": len(steps),
        "step_s_median": statistics.median(s.seconds for s in steps),
        "hidden_share_median": statistics.median(
            s.hidden_share() for s in steps if s.hidden_share() is not None),
        "step": {
            "seconds": step.seconds,
            "hidden_share": step.hidden_share(),
            "pull_active_s": length(step.pull_active()),
            "compute_busy_s": length(step.compute_busy()),
            "pulls": [{"name": p.name, "layer": p.layer, "start_s": p.start - step.start,
                       "done_s": p.done - step.start} for p in step.pulls],
            "first_forward_op_s": step.first_op_of(names),
            "first_backward_op_s": next((a - step.start for n, _, a, _ in step.ops
                                         if n.startswith("gradient_tape/")), None),
            "layers": names,
        },
    }


def plot(results: list[dict], path: str, title: str) -> None:
    import matplotlib
    from matplotlib.figure import Figure

    colors = matplotlib.colormaps["tab10"].colors
    fig = Figure(figsize=(6 * len(results), 6.5), layout="constrained")
    axes = fig.subplots(1, len(results), sharex=True)
    axes = axes if len(results) > 1 else [axes]
    for ax, r in zip(axes, results, strict=True):
        step = r["step"]
        layers = [n for n in step["layers"] if n != "images"]
        row = {n: k for k, n in enumerate(layers)}
        batches = [p for p in step["pulls"] if p["layer"] is None]  # packed batches
        for p in step["pulls"]:
            y = row.get(p["layer"], -1 - batches.index(p) if p in batches else None)
            if y is None:
                continue
            ax.plot([p["start_s"], p["done_s"]], [y, y], color=colors[0], linewidth=4,
                    solid_capstyle="butt", alpha=0.6)
        for name, t in step["first_forward_op_s"].items():
            if name in row:
                ax.plot([t], [row[name]], marker="|", color=colors[3], markersize=12, mew=2)
        if step["first_backward_op_s"] is not None:
            ax.axvline(step["first_backward_op_s"], color="gray", linestyle=":", linewidth=1)
        ticks = list(range(len(layers))) + [-1 - k for k in range(len(batches))]
        labels = layers + [f"message {k + 1}" for k in range(len(batches))]
        ax.set_yticks(ticks, labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("seconds after the step's first pull")
        ax.set_title(f"{r['schedule']}: step {step['seconds']:.2f} s, "
                     f"{step['hidden_share']:.0%} of pull time hidden", fontsize=9)
    fig.suptitle(f"{title}\nbars: pulls (receive issued -> arrived); ticks: first forward op; "
                 "dotted: backward starts", fontsize=9)
    fig.savefig(path, dpi=120)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="vgg11")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--ps", type=int, default=2)
    p.add_argument("--bandwidth", default="1gbit")
    p.add_argument("--schedules", nargs="+", default=["default", "ibatch", "layer"])
    p.add_argument("--seconds", type=float, default=15.0, help="trace length per schedule")
    p.add_argument("--out", required=True)
    p.add_argument("--plot")
    args = p.parse_args()

    from ralp._cli import quiet_tensorflow
    from ralp.bench.launcher import Launcher
    from ralp.cluster.fresh_process import run_in_fresh_process

    quiet_tensorflow()
    launcher = Launcher("netns", bandwidth=args.bandwidth)
    launcher.check()
    results = []
    for schedule in args.schedules:
        with launcher.cluster(args.workers, args.ps, trace=True) as handle:
            results.append(run_in_fresh_process(
                traced_steps, handle.spec, handle.profiler_address, args.model,
                args.image_size, args.batch_size, schedule, args.seconds,
                netns=handle.netns, timeout=900))
        r = results[-1]
        first = r["step"]["first_forward_op_s"]
        layer = next(n for n in r["step"]["layers"] if n in first)  # the first layer's forward
        print(f"{schedule:8s} step {r['step_s_median']:.3f} s (median of {r['steps_traced']}), "
              f"pull time hidden {r['hidden_share_median']:.0%}, {layer} starts "
              f"{first[layer]:.3f} s after the first pull")
    title = (f"{args.model} {args.image_size}px batch {args.batch_size}, plain PS "
             f"{args.workers} workers + {args.ps} PS, netns {args.bandwidth}: worker 0")
    Path(args.out).write_text(json.dumps({"command": " ".join(sys.argv), "title": title,
                                          "results": results}, indent=1))
    if args.plot:
        plot(results, args.plot, title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
