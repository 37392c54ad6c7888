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
- the pushes: the worker's gradients into the step ledger's guarded update, when the worker
  handed each over (its send, as the backward pass produced it) and when it arrived (the
  PS's receive, issued when the PS's part of the step starts);
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
import re
import statistics
import sys
import tempfile
import threading

PORT = 6009  # every task serves tf.profiler on it, in its own namespace
UPDATE_OPS = ("ResourceApply", "AssignSubVariableOp", "AssignAddVariableOp", "AssignVariableOp")
# a push: what the PS receives into the step ledger's guarded update (the lowered cond's
# then-branch, ralp/ps_strategy/steps.py), the gradients and nothing else of the worker's
STEP_FUNCTION = "EagerLocalExecute: __inference_ralp_train_step"  # a step on the worker
GUARDED = "cond/then/"  # the step ledger's guarded update, as the lowered cond names it
PUSH = re.compile(r"(^|/)cond(_\d+)?/then/_\d+/input/")


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
                        batch_size=args.batch_size, pulls=args.pulls)
    data = synthetic_dataset_fn(args.image_size, args.batch_size, 1000)
    workers = trainer.runtime.workers
    trainer.fit(data, steps_per_epoch=2 * workers, batch_size=args.batch_size, verbose=0)
    stop = threading.Event()

    def keep_training() -> None:  # several steps per fit: a fit's own start is no step's
        while not stop.is_set():
            trainer.fit(data, steps_per_epoch=8 * workers, batch_size=args.batch_size,
                        verbose=0)

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
    """Every step of worker 0 (a run of its step function) whose pushes the PS trace holds,
    in time order; times from the step function's start on the worker."""
    from ralp.audit.timeline import PULL_MARKERS
    from ralp.placement.rewriter import layer_of_op

    worker, ps = _events(worker_path), _events(ps_path)
    windows = sorted((e.start, e.start + e.seconds) for e in worker
                     if e.name.startswith(STEP_FUNCTION))
    on_worker, on_ps = _receives(worker), _receives(ps)
    ops = [(e.name, e.start, e.start + e.seconds) for e in worker
           if e.op_type and e.op_type not in ("_Recv", "_Send")]
    updates = [e.start for e in ps if GUARDED in e.name
               and any(e.op_type.startswith(u) for u in UPDATE_OPS)]
    sends = [(e.name, e.start) for e in worker if e.op_type == "_Send" and PUSH.search(e.name)]
    names = set(layers)
    rows = []
    for start, end in windows:
        ids = {i for i, r in on_worker.items() if any(start <= t[0] <= end for t in r.values())}
        pulls = {n: t for i in ids for n, t in on_worker[i].items()
                 if any(m in n for m in PULL_MARKERS) and t[1] == t[1]}
        pushes = [t[1] for i in ids for n, t in on_ps.get(i, {}).items()
                  if PUSH.search(n) and t[1] == t[1]]
        inside = [o for o in ops if start <= o[1] <= end]
        backward = [o for o in inside if o[0].startswith("gradient_tape/")]
        if not (backward and pushes and pulls):
            continue
        firsts: dict[str, float] = {}  # each layer's first forward op
        for name, a, _ in inside:
            layer = None if name.startswith("gradient_tape/") else layer_of_op(
                name.split(":")[0], names)
            if layer is not None and layer not in firsts:
                firsts[layer] = a
        arrived: dict[str, float] = {}  # each layer's last pull
        for n, t in pulls.items():
            layer = layer_of_op(n, names)
            if layer is not None:
                arrived[layer] = max(arrived.get(layer, t[1]), t[1])
        bwd_start, bwd_end = min(o[1] for o in backward), max(o[2] for o in backward)
        last_push = max(pushes)
        sent = [t for _, t in sends if start <= t <= end]
        last_pull = max(t[1] for t in pulls.values())
        rows.append({
            "step_s": end - start, "pulls": len(pulls), "last_pull_arrived_s": last_pull - start,
            "forward_first_op_s": min(firsts.values()) - start if firsts else None,
            "layers_started_before_last_pull": sum(a < last_pull for a in firsts.values()),
            "layers": {layer: {"first_op_s": firsts[layer] - start,
                               "pulled_s": arrived[layer] - start if layer in arrived else None}
                       for layer in sorted(firsts, key=firsts.get)},
            "backward_s": [bwd_start - start, bwd_end - start],
            "pushes": len(pushes),
            "pushes_sent_s": [min(sent) - start, max(sent) - start] if sent else None,
            "pushes_sent_in_backward": sum(bwd_start <= t <= bwd_end for t in sent),
            "first_push_arrived_s": min(pushes) - start,
            "last_push_arrived_s": last_push - start,
            "pushes_arrived_in_backward": sum(t <= bwd_end for t in pushes),
            "first_update_s": min((u for u in updates if start <= u <= end), default=end) - start,
            "updates_before_last_push": sum(start <= u < last_push for u in updates),
            "step_end_after_last_push_s": end - last_push,
        })
    return rows


def medians(rows: list[dict]) -> dict:
    keys = [k for k in rows[0] if k not in ("layers", "backward_s", "pushes_sent_s")
            and rows[0][k] is not None]
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
    with tempfile.TemporaryDirectory(prefix="ralp-push-timeline-") as scratch:
        logdir = args.keep or scratch
        with NetnsCluster(args.workers, args.ps, bandwidth=args.bandwidth, task_env=env) as c:
            hosts = {"worker:0": c.spec.workers[0], "ps:0": c.spec.ps[0]}
            addresses = {t: f"{hosts[t].rsplit(':', 1)[0]}:{PORT}" for t in traced_tasks}
            got = run_in_fresh_process(traced, c.spec, addresses, args, logdir,
                                       netns=c.chief_namespace, timeout=1200)
        rows = analyse(got["traces"]["worker:0"], got["traces"]["ps:0"], got["layers"])
    return {"model": args.model, "mode": args.mode, "pulls": args.pulls,
            "workers": args.workers, "ps": args.ps,
            "bandwidth": args.bandwidth, "image_size": args.image_size,
            "batch_size": args.batch_size, "plan": got["plan"],
            "median": medians(rows) if rows else {"steps": 0}, "steps": rows}


def summary(r: dict) -> str:
    m = r["median"]
    if not m["steps"]:
        return f"{r['model']} {r['mode']}: no step of worker 0 in both traces"
    ms = lambda k: f"{1e3 * m[k]:.0f}" if k in m else "-"  # noqa: E731
    return (f"{r['model']} {r['mode']} pulls={r.get('pulls', 'default')} "
            f"{r['workers']}+{r['ps']} at {r['bandwidth']}, "
            f"{m['steps']} steps of worker 0 (medians, ms from the step function's start): "
            f"step {ms('step_s')}; forward's first op {ms('forward_first_op_s')}, last pull "
            f"arrived {ms('last_pull_arrived_s')} ({m.get('pulls', 0):g} pulls, "
            f"{m['layers_started_before_last_pull']:g} layers started before it); backward "
            f"ends {ms('backward_end_s')}; pushes arrive {ms('first_push_arrived_s')} to "
            f"{ms('last_push_arrived_s')} ({m['pushes_sent_in_backward']:g} sent during the "
            f"backward pass), {m['pushes_arrived_in_backward']:g} of "
            f"{m['pushes']:g} arrived before it ends; the PS's first update "
            f"{ms('first_update_s')}, {m['updates_before_last_push']:g} before the last push; "
            f"the step ends {ms('step_end_after_last_push_s')} after the last push")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="alexnet")
    p.add_argument("--mode", choices=("ps", "ralp"), default="ps")
    p.add_argument("--image-size", type=int, default=75)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--ps", type=int, default=1)
    p.add_argument("--bandwidth", default="1gbit")
    p.add_argument("--pulls", choices=("default", "layer", "ibatch"), default="default")
    p.add_argument("--seconds", type=float, default=30.0, help="trace length")
    p.add_argument("--out", required=True)
    p.add_argument("--keep", help="keep the traces in this folder")
    args = p.parse_args()
    result = run(args)
    with open(args.out, "w") as f:
        json.dump({"command": " ".join(["python -m lab.tools.push_timeline", *sys.argv[1:]]),
                   **result}, f, indent=1)
    print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
