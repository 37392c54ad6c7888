"""What the studies share: the digits split, their sharded input, a PS training run's
accuracy curve over time, the time a curve takes to a target accuracy, and saving or showing an
experiment's results."""

from __future__ import annotations

import json
import math
import statistics
import sys
import threading
import time
from pathlib import Path

from ralp._cli import UsageError, fail

IMAGE = 28  # the digits are scaled to this side for lenet


def digits_split(seed: int = 0):
    """(x_train, y_train, x_test, y_test): the digits at 8x8x1 in [0, 1], stratified 75/25."""
    import numpy as np
    from sklearn.model_selection import train_test_split

    from ralp.models.digits import digits_arrays

    images, labels = digits_arrays(seed)
    x_train, x_test, y_train, y_test = train_test_split(images, labels, test_size=0.25,
                                                        random_state=seed, stratify=labels)
    return x_train, y_train.astype(np.int32), x_test, y_test.astype(np.int32)


def sharded_dataset_fn(x_train, y_train, batch: int, seed: int):
    """The training digits sharded over the workers (by input pipeline), each shard shuffled,
    repeated, batched and scaled to the model's input on the worker. (The pipeline id may be a
    tensor: the PS modes' own schedule traces the function once for every worker.)"""
    import tensorflow as tf

    from ralp.models.digits import to_model_input

    def dataset_fn(context=None):
        shard, shards = (context.input_pipeline_id, context.num_input_pipelines) if context \
            else (0, 1)
        return (tf.data.Dataset.from_tensor_slices((x_train, y_train)).shard(shards, shard)
                .shuffle(len(y_train), seed=seed, reshuffle_each_iteration=True).repeat()
                .batch(batch, drop_remainder=True)
                .map(lambda x, y: (to_model_input(x, IMAGE), y)).prefetch(2))

    return dataset_fn


def sync_curve(spec, sync: str, slow_worker: str | None, mode: str, steps: int, batch: int,
               learning_rate: float, eval_every: float, seed: int,
               read_links=None) -> dict:
    """The coordinator's job: train under ``sync``; weight snapshots over time, evaluated."""
    import keras
    import numpy as np

    import ralp

    x_train, y_train, x_test, y_test = digits_split(seed)
    dataset_fn = sharded_dataset_fn(x_train, y_train, batch, seed)

    keras.utils.set_random_seed(seed)
    model = ralp.build_model("lenet", num_classes=10, image_size=IMAGE)
    initial = model.get_weights()  # before wrap: PSS makes the local variables unreadable
    trainer = ralp.wrap(model, spec, mode=mode, optimizer=keras.optimizers.SGD(learning_rate),
                        batch_size=batch, sync=sync)
    if slow_worker:
        from ralp.ps_strategy.sync import SlowWorker

        trainer.runtime.slow_worker = SlowWorker.parse(slow_worker)
    per_update = len(spec.workers) if sync == "bsp" else 1  # a BSP round: a batch per worker
    steps //= per_update
    links_before = dict(read_links()) if read_links else None
    history, snapshots, wall = _train_with_snapshots(trainer, dataset_fn, steps, batch,
                                                     eval_every)
    snapshots = [(t, n * per_update, w) for t, n, w in snapshots]  # worker batches done
    links_after = dict(read_links()) if read_links else None
    curve = _accuracy_curve(trainer.unwrap(), [(0.0, 0, initial), *snapshots], x_test, y_test)
    record = history.sync[0].to_dict() if history.sync else {}
    counts = np.bincount(history.step_workers, minlength=len(spec.workers)).tolist() \
        if history.step_workers else None
    return {
        "sync": sync, "slow_worker": slow_worker, "mode": trainer.mode, "steps": steps,
        "batch_size": batch, "learning_rate": learning_rate, "wall_s": wall,
        "iterations_per_s": steps / wall, "curve": curve,
        "final_accuracy": curve[-1]["accuracy"],
        "max_gap": record.get("max_gap"), "total_waiting_s": record.get("total_waiting_s"),
        "waiting_s": record.get("waiting_s"), "steps_per_worker": counts,
        "dssp_decisions": len(record.get("decisions", [])),
        "slow_delay_s": record.get("slow_delay_s"),
        # Bytes each link carried while training (netns): the steps run on the workers, so
        # the chief's link carries only control and the weight snapshots.
        "link_bytes": {t: links_after[t].total - links_before[t].total for t in links_after}
        if links_after else None,
    }


def _train_with_snapshots(trainer, dataset_fn, steps: int, batch: int,
                          eval_every: float) -> tuple:
    """(history, [(seconds, steps done, weights)...], wall seconds): train, a snapshot of the
    weights every ``eval_every`` seconds and one at the end."""
    import keras

    snapshots: list[tuple[float, int, list]] = []
    done = [0]
    stop = threading.Event()

    class Count(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            done[0] += 1

    start = time.perf_counter()

    def watch() -> None:
        while not stop.wait(eval_every):
            snapshots.append((time.perf_counter() - start, done[0], trainer.get_weights()))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        history = trainer.fit(dataset_fn, steps_per_epoch=steps, batch_size=batch,
                              verbose=0, callbacks=[Count()])
    finally:
        stop.set()
        watcher.join()
    wall = time.perf_counter() - start
    snapshots.append((wall, done[0], trainer.get_weights()))
    return history, snapshots, wall


def _accuracy_curve(plain, snapshots: list, x_test, y_test) -> list[dict]:
    """Each snapshot's test accuracy, evaluated on the unwrapped model."""
    import numpy as np

    from ralp.models.digits import to_model_input

    x_eval = to_model_input(x_test, IMAGE)
    curve = []
    for t, n, weights in snapshots:
        plain.set_weights(weights)
        logits = plain.predict(x_eval, batch_size=512, verbose=0)
        accuracy = float(np.mean(np.argmax(logits, -1) == y_test))
        curve.append({"time_s": t, "steps": n, "accuracy": accuracy})
    return curve


def time_to(curve: list[dict], target: float) -> float | None:
    """The first time the accuracy reached ``target`` (None if it never did)."""
    for point in curve:
        if point["accuracy"] >= target:
            return point["time_s"]
    return None


def median_time_to(runs: list[dict], target: float) -> float | None:
    """The median over ``runs`` (seeds) of the time to ``target``; a run that never got there
    counts as infinitely long, so the median is None when fewer than half did."""
    times = sorted(t if (t := time_to(r["curve"], target)) is not None else math.inf
                   for r in runs)
    value = statistics.median(times) if times else math.inf
    return None if math.isinf(value) else value


def saved_or_new(prog: str, args, run_new) -> list[dict] | int:
    """An experiment's results: saved ones (``--show``) or ``run_new(args)``'s; an exit code
    instead when the input was bad (2) or the run was interrupted (130)."""
    try:
        return json.loads(Path(args.show).read_text())["results"] if args.show else run_new(args)
    except (UsageError, ValueError, OSError) as e:
        return fail(prog, str(e))
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; everything it started was stopped", file=sys.stderr)
        return 130


def write_results(args, results: list[dict]) -> None:
    """Save an experiment's results with its arguments to ``--out``, if given."""
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"args": vars(args), "results": results}, indent=1))
        print(f"wrote {args.out}")
