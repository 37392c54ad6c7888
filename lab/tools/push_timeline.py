"""Do a PS mode's pushes leave while the backward pass runs, and does the forward pass start
before the last pull arrives? Real steps' timelines of a worker and a PS task, on one clock.

Trains a zoo model in mode ps or ralp on a simulated cluster (netns, shaped links; every task
in a device of its own) and traces worker 0 and PS task 0 with tf.profiler at the same time
while it trains. The two traces are laid on one clock (each trace's start,
:func:`ralp._compat.xspace_start_time`; every task runs on this host). Per step of worker 0
(its pulls' step id, which the PS's part of the step shares):

- the worker's forward pass (its first op not under the gradient tape, the first layer's
  start), its backward pass (the ops under ``gradient_tape/``) and its pulls (receives of
  variables from the PS: issued, arrived);
- the pushes: the PS's receives of the worker's gradients (issued when the PS's part of the
  step starts; arrived), by how long they arrived before the backward pass ended;
- the PS's updates (``ResourceApply*`` / ``Assign*VariableOp`` on the PS), against the last
  push's arrival: the step ledger's gate (ralp/ps_strategy/steps.py) starts no write of a
  group before all its gradients have landed.

    python -m lab.tools.push_timeline --model alexnet --mode ps --workers 1 --ps 1 \\
        --bandwidth 1gbit --out lab/results/push-timeline/push_timeline_alexnet_ps.json
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import threading

PORT = 6009  # every task serves tf.profiler on it, in its own namespace
UPDATE_OPS = ("ResourceApply", "AssignSubVariableOp", "AssignAddVariableOp", "AssignVariableOp")


def traced(spec, addresses: dict, args, logdir: str) -> dict:
    """In the coordinator: place, warm up, then trace every task of ``addresses`` at once
    while training goes on; the traces' paths by task."""
    import keras
    import tensorflow as tf

    import ralp
    from ralp.models.synthetic import synthetic_dataset_fn

    keras.utils.set_random_seed(0)
    model = ralp.build_model(args.model, image_size=args.image_size)
    trainer = ralp.wrap(model, spec, mode=args.mode, optimizer=keras.optimizers.SGD(1e-3),
                        batch_size=args.batch_size)
    data = synthetic_dataset_fn(args.image_size, args.batch_size, 1000)
    workers = trainer.runtime.workers
    trainer.fit(data, steps_per_epoch=2 * workers, batch_size=args.batch_size, verbose=0)
    stop = threading.Event()

    def keep_training() -> None:
        while not stop.is_set():
            trainer.fit(data, steps_per_epoch=workers, batch_size=args.batch_size, verbose=0)

    def capture(task: str) -> None:
        tf.profiler.experimental.client.trace(f"grpc://{addresses[task]}",
                                              os.path.join(logdir, task.replace(":", "")),
                                              duration_ms=int(args.seconds * 1000))

    trainer_thread = threading.Thread(target=keep_training, daemon=True)
    trainer_thread.start()
    try:
        captures = [threading.Thread(target=capture, args=(t,)) for t in addresses]
        for c in captures:
            c.start()
        for c in captures:
            c.join()
    finally:
        stop.set()
        trainer_thread.join()
    found = {}
    for task in addresses:
        paths = glob.glob(os.path.join(logdir, task.replace(":", ""), "**", "*.xplane.pb"),
                          recursive=True)
        found[task] = sorted(paths, key=os.path.getmtime)[-1]
    return {"traces": found, "plan": str(trainer.plan),
            "layers": [layer.name for layer in model.layers]}


def _events(path: str):
    """The trace's events, their times on the epoch's clock."""
    from dataclasses import replace

    from ralp._compat import read_xspace_events, xspace_start_time

    start = xspace_start_time(path)
    return [replace(e, start=start + e.start) for e in read_xspace_events(path)]


def _receives(events) -> dict[str, dict[str, list[float]]]:
    """step id -> receive node -> [issued, arrived] (the trace's asynchronous receives)."""
    found: dict[str, dict[str, list[float]]] = {}
    for e in events:
        if e.stats.get("kernel_type") != "_Recv" or "step_id" not in e.stats:
            continue
        times = found.setdefault(e.stats["step_id"], {}).setdefault(
            e.stats.get("name", ""), [float("nan"), float("nan")])
        if e.name.endswith("::Start"):
            times[0] = e.start
        elif e.name.endswith("::Done"):
            times[1] = e.start
    return found


def analyse(worker_path: str, ps_path: str, layers: list[str]) -> list[dict]:
    """Every step of worker 0 that the PS trace also holds, in time order."""
    from ralp.audit.timeline import PULL_MARKERS
    from ralp.placement.rewriter import layer_of_op

    worker, ps = _events(worker_path), _events(ps_path)
    pulls = {step: {n: t for n, t in r.items() if any(m in n for m in PULL_MARKERS)}
             for step, r in _receives(worker).items()}
    pushes = {step: {n: t for n, t in r.items() if "gradient_tape" in n}
              for step, r in _receives(ps).items()}
    starts = sorted((min(t[0] for t in p.values()), step) for step, p in pulls.items() if p)
    ops = [(e.name, e.op_type, e.start, e.start + e.seconds) for e in worker
           if e.op_type and e.op_type not in ("_Recv", "_Send")]
    updates = [(e.start, e.start + e.seconds) for e in ps
               if any(e.op_type.startswith(u) for u in UPDATE_OPS)]
    names = set(layers)
    rows = []
    for k, (start, step) in enumerate(starts[:-1]):
        end = starts[k + 1][0]
        inside = [o for o in ops if start <= o[2] < end]
        backward = [o for o in inside if o[0].startswith("gradient_tape/")]
        arrived = [t for t in pushes.get(step, {}).values() if t[1] == t[1]]
        if not backward or not arrived:
            continue
        forward = [o for o in inside if not o[0].startswith("gradient_tape/")
                   and layer_of_op(o[0].split(":")[0], names) is not None]
        bwd_end = max(o[3] for o in backward)
        last_push = max(t[1] for t in arrived)
        after = [u for u in updates if last_push - 1.0 <= u[0] <= end + 1.0]
        pulled = [t[1] for t in pulls[step].values() if t[1] == t[1]]

        def at(t: float, start: float = start) -> float:
            return round(t - start, 4)

        rows.append({
            "step_id": step, "step_s": at(end),
            "forward_first_op_s": at(min(o[2] for o in forward)) if forward else None,
            "last_pull_arrived_s": at(max(pulled)) if pulled else None,
            "pulls": len(pulled),
            "backward_s": [at(min(o[2] for o in backward)), at(bwd_end)],
            "pushes": len(arrived),
            "first_push_arrived_s": at(min(t[1] for t in arrived)),
            "last_push_arrived_s": at(last_push),
            "pushes_arrived_in_backward": sum(t[1] <= bwd_end for t in arrived),
            "first_update_s": at(min(u[0] for u in after)) if after else None,
            "updates_before_last_push": sum(u[0] < last_push for u in after),
        })
    return rows


def medians(rows: list[dict]) -> dict:
    keys = [k for k in rows[0] if k not in ("step_id", "backward_s") and rows[0][k] is not None]
    out = {k: statistics.median(r[k] for r in rows if r[k] is not None) for k in keys}
    out["backward_end_s"] = statistics.median(r["backward_s"][1] for r in rows)
    out["steps"] = len(rows)
    return out


def run(args) -> dict:
    from ralp._cli import quiet_tensorflow
    from ralp.cluster.fresh_process import run_in_fresh_process
    from ralp.cluster.netns_cluster import NetnsCluster
    from ralp.cluster.task_server import PROFILER_PORT_ENV

    quiet_tensorflow()
    traced_tasks = ["worker:0", "ps:0"]
    env = {task: {PROFILER_PORT_ENV: str(PORT)} for task in traced_tasks}
    with tempfile.TemporaryDirectory(prefix="ralp-push-timeline-") as logdir:
        with NetnsCluster(args.workers, args.ps, bandwidth=args.bandwidth, task_env=env) as c:
            hosts = {"worker:0": c.spec.workers[0], "ps:0": c.spec.ps[0]}
            addresses = {t: f"{hosts[t].rsplit(':', 1)[0]}:{PORT}" for t in traced_tasks}
            got = run_in_fresh_process(traced, c.spec, addresses, args, logdir,
                                       netns=c.chief_namespace, timeout=1200)
        rows = analyse(got["traces"]["worker:0"], got["traces"]["ps:0"], got["layers"])
    return {"model": args.model, "mode": args.mode, "workers": args.workers, "ps": args.ps,
            "bandwidth": args.bandwidth, "image_size": args.image_size,
            "batch_size": args.batch_size, "plan": got["plan"],
            "median": medians(rows) if rows else {"steps": 0}, "steps": rows}


def summary(r: dict) -> str:
    m = r["median"]
    if not m["steps"]:
        return f"{r['model']} {r['mode']}: no step of worker 0 in both traces"
    ms = lambda k: f"{1e3 * m[k]:.0f}" if k in m else "-"  # noqa: E731
    return (f"{r['model']} {r['mode']} {r['workers']}+{r['ps']} at {r['bandwidth']}, "
            f"{m['steps']} steps of worker 0 (medians, ms from the step's first pull): "
            f"step {ms('step_s')}; forward's first op {ms('forward_first_op_s')}, last pull "
            f"arrived {ms('last_pull_arrived_s')} ({m.get('pulls', 0):g} pulls); backward "
            f"ends {ms('backward_end_s')}; pushes arrive {ms('first_push_arrived_s')} to "
            f"{ms('last_push_arrived_s')}, {m['pushes_arrived_in_backward']:g} of "
            f"{m['pushes']:g} before the backward pass ends; the PS's first update "
            f"{ms('first_update_s')}, {m['updates_before_last_push']:g} before the last push")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="alexnet")
    p.add_argument("--mode", choices=("ps", "ralp"), default="ps")
    p.add_argument("--image-size", type=int, default=75)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--ps", type=int, default=1)
    p.add_argument("--bandwidth", default="1gbit")
    p.add_argument("--seconds", type=float, default=12.0, help="trace length")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    result = run(args)
    with open(args.out, "w") as f:
        json.dump({"command": " ".join(sys.argv), **result}, f, indent=1)
    print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
