"""Stanza's accuracy experiment, in its structure: layer separation against plain PS on real
data, over a network where plain PS is network-bound.

    python -m lab.studies.stanza_accuracy --workers 2 4 --bandwidth 1gbit --samples 19200 \\
        --target 0.9 --out stanza_digits.json --plot stanza_digits.png

The zoo's lenet (28 px; 97% of its parameters in its FC layers) trains on scikit-learn's
handwritten digits (75% to train, sharded over the data-reading workers; 25% held out), on a
netns cluster with every link shaped to ``--bandwidth``, in two ways per worker count W:

- ``ps``: plain ParameterServerStrategy, W workers + 1 PS, PSS's own (asynchronous) steps:
  every step pulls and pushes every variable over the PS link;
- ``stanza``: W CONV ranks + 1 FC rank on Horovod (BSP): the convolutions' gradients are
  ring-allreduced among the CONV ranks, and only activations and their gradients reach the FC
  rank.

Both see the same number of samples (``--samples``) with the same per-worker batch and
learning rate; with ``--lr-scaling linear`` (or ``--scale-lr``) Stanza's learning rate is W
times PS's (its one synchronous step per W batches then moves the weights as far as PS's W
asynchronous steps), with ``--lr-scaling sqrt`` sqrt(W) times (the square-root rule for a W
times larger batch, which keeps the gradient noise per step the same).
Test accuracy is taken from weight snapshots (PS: read by the coordinator every
``--eval-every`` seconds; Stanza: shared by a collective every ``--eval-steps`` steps,
its time excluded from the clock) and computed after training. Reported per run: time to the
target accuracy, final accuracy, samples per second, bytes on the PS / FC link.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from lab.studies.digits_data import IMAGE, digits_split, sync_curve, time_to, write_results
from ralp._cli import UsageError, fail, positive_int, quiet_tensorflow
from ralp.defaults import DEFAULT_BATCH_SIZE
from ralp.errors import InvalidArgumentError

PROG = "python -m lab.studies.stanza_accuracy"
MODEL = "lenet"


def stanza_rank(samples: int, batch: int, learning_rate: float, eval_steps: int, seed: int,
                read_links=None) -> dict | None:
    """One Horovod rank of the Stanza run (all but the last rank read data); rank 0 returns
    the run's figures, the other ranks None."""
    import horovod.tensorflow as hvd
    import keras
    import numpy as np

    import ralp
    from ralp.models import build_model
    from ralp.models.digits import to_model_input
    from ralp.training.stepper import Stepper

    hvd.init(process_sets="dynamic")
    keras.utils.set_random_seed(seed)
    model = build_model(MODEL, num_classes=10, image_size=IMAGE)
    trainer = ralp.wrap(model, mode="stanza", optimizer=keras.optimizers.SGD(learning_rate),
                        fc_workers=1)
    runtime = trainer.runtime
    conv = runtime.layout.conv_workers
    x_train, y_train, x_test, y_test = digits_split(seed)
    x_train = to_model_input(x_train, IMAGE).numpy()
    stepper = Stepper(trainer, x_train, y_train, batch_size=batch * conv, seed=seed,
                      shuffle=True)
    steps = max(1, samples // (conv * batch))  # each step takes one batch per CONV rank
    snapshots = [(0.0, 0, runtime.weights())]
    stepper.barrier()
    before = dict(read_links()) if read_links and hvd.rank() == 0 else None
    clock, done = 0.0, 0
    while done < steps:
        chunk = min(eval_steps, steps - done)
        start = time.perf_counter()
        history = stepper.run(chunk)
        clock += history.step_end_times[-1] - start
        done += chunk
        snapshots.append((clock, done * conv, runtime.weights()))
    stepper.barrier()
    after = dict(read_links()) if read_links and hvd.rank() == 0 else None
    if hvd.rank() != 0:
        return None
    x_eval = to_model_input(x_test, IMAGE)
    curve = []
    for t, n, weights in snapshots:
        model.set_weights(weights)
        logits = model.predict(x_eval, batch_size=512, verbose=0)
        curve.append({"time_s": t, "steps": n,
                      "accuracy": float(np.mean(np.argmax(logits, -1) == y_test))})
    return {"wall_s": clock, "steps": steps * conv, "curve": curve,
            "final_accuracy": curve[-1]["accuracy"], "final_loss": history.step_losses[-1],
            "link_bytes": {t: after[t].total - before[t].total for t in after}
            if after else None}


def _rank_main(argv: Sequence[str]) -> int:
    from ralp._messages import emit

    spec = json.loads(argv[0])
    read_links = None
    if len(argv) > 1:  # netns: the link counters' fields
        from ralp.emulation.counters import TaskLinks

        fields = json.loads(argv[1])
        read_links = TaskLinks(fields["switch_namespace"],
                               tuple(tuple(pair) for pair in fields["hosts"]))
    quiet_tensorflow()
    figures = stanza_rank(**spec, read_links=read_links)
    if figures is not None:
        emit("record", figures)
    return 0


LR_SCALINGS = ("none", "linear", "sqrt")


def learning_rate_for(mode: str, workers: int, learning_rate: float, scaling: str) -> float:
    """A run's learning rate: PS's as given; Stanza's, whose one step takes W batches, scaled
    by ``scaling``: W times (``linear``), sqrt(W) times (``sqrt``) or not (``none``)."""
    if scaling not in LR_SCALINGS:
        raise InvalidArgumentError(f"learning-rate scaling {scaling!r}: use one of {', '.join(LR_SCALINGS)}")
    if mode != "stanza" or scaling == "none":
        return learning_rate
    return learning_rate * (workers if scaling == "linear" else math.sqrt(workers))


def run_stanza(workers: int, bandwidth: str, samples: int, batch: int, learning_rate: float,
               eval_steps: int, seed: int) -> dict:
    from ralp.horovod.launch import launch

    spec = {"samples": samples, "batch": batch, "learning_rate": learning_rate,
            "eval_steps": eval_steps, "seed": seed}

    def rank_command(links, _cpu=None) -> list[str]:  # shared CPUs: no device meter
        fields = {"switch_namespace": links.switch_namespace,
                  "hosts": [list(h) for h in links.hosts]}
        return [sys.executable, "-m", "lab.studies.stanza_accuracy", "--rank",
                json.dumps(spec), json.dumps(fields)]

    return launch(rank_command, workers, "netns", bandwidth=bandwidth, fc_ranks=1, timeout=3600)


def run_ps(workers: int, bandwidth: str, samples: int, batch: int, learning_rate: float,
           eval_every: float, seed: int) -> dict:
    from ralp.bench.launcher import Launcher
    from ralp.cluster.fresh_process import run_in_fresh_process

    launcher = Launcher("netns", bandwidth=bandwidth)
    launcher.check()
    with launcher.cluster(workers, 1) as handle:
        figures = run_in_fresh_process(
            sync_curve, handle.spec, None, None, "ps", max(1, samples // batch), batch,
            learning_rate, eval_every, seed, handle.read_links, netns=handle.netns,
            timeout=3600, env={"CUDA_VISIBLE_DEVICES": "-1"},
        )
    figures["steps"] = max(1, samples // batch)
    return figures


def _figures(figures: dict, batch: int, targets) -> dict:
    """The result's figures from a run's raw figures (PS: sync_curve's; Stanza: rank 0's)."""
    curve = figures["curve"]
    links = figures.get("link_bytes") or {}
    return {
        "worker_batches": figures["steps"], "wall_s": figures["wall_s"],
        "samples_per_s": figures["steps"] * batch / figures["wall_s"],
        "final_accuracy": figures["final_accuracy"],
        "time_to": {f"{t:g}": time_to(curve, t) for t in targets},
        "server_link_bytes": links.get("ps:0"), "link_bytes": links or None, "curve": curve,
    }


def table(results: list[dict], targets: Sequence[float]) -> str:
    from ralp._text import text_grid

    header = ["mode", "W", "samples/s", *(f"t to {t:.0%} (s)" for t in targets),
              "speedup", "final acc", "PS/FC link MB"]
    rows = []
    for r in results:
        if r.get("error"):
            rows.append([r["mode"], str(r["workers"]), *["-"] * (len(header) - 3),
                         f"error: {r['error']}"])
            continue
        ps = next((p for p in results if p["mode"] == "ps" and p["workers"] == r["workers"]
                   and not p.get("error")), None)
        key = f"{targets[0]:g}"
        speed = "-"
        if r["mode"] == "stanza" and ps and ps["time_to"][key] and r["time_to"][key]:
            speed = f"{ps['time_to'][key] / r['time_to'][key]:.2f}x"
        rows.append([r["mode"], str(r["workers"]),
                     f"{r['samples_per_s']:.0f}" if r["samples_per_s"] else "-",
                     *("never" if r["time_to"][f"{t:g}"] is None
                       else f"{r['time_to'][f'{t:g}']:.1f}" for t in targets),
                     speed, f"{r['final_accuracy']:.3f}",
                     "-" if r["server_link_bytes"] is None
                     else f"{r['server_link_bytes'] / 1e6:.1f}"])
    return "\n".join(text_grid(header, rows))


def plot(results: list[dict], targets: Sequence[float], path: str, title: str) -> None:
    """Test accuracy against wall time, one line per mode and worker count."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.4), layout="constrained")
    ax = fig.subplots()
    for r in (r for r in results if not r.get("error")):
        curve = r["curve"]
        ax.plot([p["time_s"] for p in curve], [p["accuracy"] for p in curve],
                "-" if r["mode"] == "stanza" else "--", marker=".",
                label=f"{r['mode']}, {r['workers']} workers")
    for t in targets:
        ax.axhline(t, color="grey", lw=0.8, ls=":")
    ax.set(xlabel="training wall time (s)", ylabel="test accuracy", ylim=(0, 1), title=title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Stanza against plain PS on the digits: "
                                "time to a target accuracy over a shaped network.")
    p.add_argument("--workers", type=positive_int, nargs="+", default=[2, 4],
                   help="data-reading workers (Stanza: CONV ranks, plus one FC rank; PS: "
                   "workers, plus one PS task); default 2 4")
    p.add_argument("--bandwidth", default="1gbit", help="every link's rate (default 1gbit)")
    p.add_argument("--samples", type=positive_int, default=19200,
                   help="training samples seen in all, the same for both modes")
    p.add_argument("--batch-size", type=positive_int, default=DEFAULT_BATCH_SIZE)
    p.add_argument("--learning-rate", type=float, default=0.05)
    p.add_argument("--lr-scaling", choices=LR_SCALINGS, default="none",
                   help="Stanza's synchronous step on W x batch samples takes W x (linear) or "
                        "sqrt(W) x (sqrt) the learning rate; PS keeps it (default none)")
    p.add_argument("--scale-lr", dest="lr_scaling", action="store_const", const="linear",
                   help="the same as --lr-scaling linear: as W asynchronous PS workers each "
                        "take a step per batch")
    p.add_argument("--eval-every", type=float, default=2.0, help="PS: seconds between snapshots")
    p.add_argument("--eval-steps", type=positive_int, default=20,
                   help="Stanza: steps between snapshots")
    p.add_argument("--target", type=float, nargs="+", default=[0.9])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", metavar="JSON")
    p.add_argument("--plot", metavar="PNG")
    p.add_argument("--show", metavar="JSON", help="run nothing: table (and --plot) of saved results")
    return p


def run(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--rank"]:
        return _rank_main(argv[1:])
    args = _parser().parse_args(argv)
    try:
        results = json.loads(Path(args.show).read_text())["results"] if args.show else _run(args)
    except (UsageError, ValueError, OSError, RuntimeError) as e:
        return fail(PROG, str(e))
    print(table(results, args.target))
    if args.plot:
        title = f"{MODEL} on digits over {results[0]['bandwidth']} links" if results else MODEL
        plot(results, args.target, args.plot, title)
        print(f"wrote {args.plot}")
    return 1 if any(r.get("error") for r in results) else 0


def _run(args) -> list[dict]:
    from tqdm import tqdm

    from lab.studies.result_schemas import make_stanza_result
    from ralp.bench.records import short_error
    from ralp.cluster.fresh_process import ChildError
    from ralp.cluster.spec import ClusterError
    from ralp.emulation.iproute import netns_unavailable_reason
    from ralp.horovod.launch import HorovodRunError, horovod_unavailable_reason

    for reason in (netns_unavailable_reason(), horovod_unavailable_reason()):
        if reason:
            raise UsageError(f"this experiment runs on netns with Horovod: {reason}")
    quiet_tensorflow()
    results = []
    plan = [(mode, w) for w in args.workers for mode in ("ps", "stanza")]
    for mode, w in tqdm(plan, unit="run", desc="modes x workers"):
        lr = learning_rate_for(mode, w, args.learning_rate, args.lr_scaling)
        where = {"workers": w, "bandwidth": args.bandwidth, "seed": args.seed,
                 "batch_size": args.batch_size, "learning_rate": lr}
        try:
            if mode == "ps":
                figures = run_ps(w, args.bandwidth, args.samples, args.batch_size, lr,
                                 args.eval_every, args.seed)
            else:
                figures = run_stanza(w, args.bandwidth, args.samples, args.batch_size, lr,
                                     args.eval_steps, args.seed)
        except (ChildError, ClusterError, HorovodRunError) as e:
            results.append(make_stanza_result(mode, where, error=short_error(e)))
            continue
        results.append(make_stanza_result(
            mode, where, _figures(figures, args.batch_size, args.target)))
    write_results(args, results)
    return results


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
