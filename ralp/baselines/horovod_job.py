"""One benchmark run in ``horovod`` mode, as each Horovod rank runs it.

    python -m ralp.baselines.horovod_job --spec RUN_JSON [--links LINKS_JSON]

Started on every rank by ``horovodrun`` (or by :mod:`ralp.baselines.netns_gloo` on the netns
backend). Every rank builds the same zoo model, warms up (each rank traces and runs its step),
then runs the measured steps. Rank 0 reads the link counters right before and after the
measured steps (behind an allreduce barrier, so every rank's traffic is inside the window)
and prints progress and the run's record as marker lines on stdout, which ``horovodrun``
forwards to the bench (``[0]<stdout>:@ralp-bench {...}``). Nothing but stdout is needed, so
this works on a real cluster with no shared file system.

The record has the same fields as the PS modes' (:func:`ralp.bench.job.bench_job`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

MARK = "@ralp-bench "


def emit(kind: str, value) -> None:
    """Send one message to the bench (rank 0 only calls this)."""
    print(MARK + json.dumps({kind: value}), flush=True)


def parse_message(line: str) -> dict | None:
    """The message in one line of a Horovod job's output, or None for any other line."""
    at = line.find(MARK)
    if at < 0:
        return None
    try:
        return json.loads(line[at + len(MARK) :])
    except json.JSONDecodeError:
        return None


def horovod_bench_job(run, read_links=None) -> dict | None:
    """Measure ``run`` (a RunSpec in mode ``horovod``) on this Horovod job; rank 0 returns
    the record fields, other ranks None."""
    import horovod.tensorflow as hvd
    import keras

    from ralp.baselines.horovod_train import HorovodTrainer
    from ralp.bench.job import PROGRESS_EVERY, dataset_fn_for, link_figures, timing
    from ralp.models import build_model
    from ralp.profiler.api import profile
    from ralp.profiler.bytes_model import horovod_traffic

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    run = run.resolved()
    if size != run.workers:
        raise RuntimeError(f"the run asks for {run.workers} workers but Horovod started {size}")
    W, B = run.workers, run.batch_size
    keras.utils.set_random_seed(run.seed)  # rank 0's initial weights are broadcast anyway
    model = build_model(run.model, num_classes=run.num_classes, image_size=run.image_size)
    # The profiler's verdict on this model, for the record.
    prof = profile(model, B, workers=W, ps=1)
    gradient_bytes = sum(
        r.param_bytes * r.trainable_params // r.params for r in prof.table.rows if r.params
    )
    predicted = horovod_traffic(gradient_bytes, W)

    say = emit if rank == 0 else (lambda kind, value: None)
    say("phase", "warm-up")
    trainer = HorovodTrainer(hvd, model, keras.optimizers.SGD(learning_rate=1e-3))
    # The same dataset function as the PS modes; a rank reads its shard as a worker would.
    import tensorflow as tf

    batches = dataset_fn_for(run)(tf.distribute.InputContext(size, rank, size))
    trainer.fit(batches, max(run.warmup, 1))

    trainer.barrier()
    say("phase", "measuring")
    before = dict(read_links()) if read_links and rank == 0 else None
    start = time.perf_counter()

    def on_step(k: int, _loss: float) -> None:
        if (k + 1) % PROGRESS_EVERY == 0:
            say("step", (k + 1) * W)  # worker batches done, as the PS modes count steps

    history = trainer.fit(batches, run.steps, on_step=on_step)
    trainer.barrier()
    after = dict(read_links()) if read_links and rank == 0 else None
    if rank != 0:
        return None

    steps = run.measured_steps  # worker batches: steps per worker x workers
    # All ranks finish a step together (the allreduce): one end time per worker batch.
    end_times = [t for t in history.step_end_times for _ in range(W)]
    record = {
        **run.to_dict(),
        "offloaded_layers": [],
        "split_after": None,
        "profiler_verdict": prof.verdict,
        "skewness": prof.skewness,
        "wall_s": history.step_end_times[-1] - start,
        "measured_steps": steps,
        **timing(end_times, start, steps, W, B),
        "bytes_per_step_predicted": float(predicted.worker_link.total),
        "ps_bytes_per_step_predicted": None,
        "final_loss": history.step_losses[-1],
    }
    record.update(link_figures(before, after, steps))
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ralp.baselines.horovod_job")
    parser.add_argument("--spec", required=True, help="the RunSpec as JSON")
    parser.add_argument("--links", help="netns link counters: TaskLinks fields as JSON")
    args = parser.parse_args(argv)

    from ralp._cli import quiet_tensorflow
    from ralp.bench.config import RunSpec

    quiet_tensorflow()
    run = RunSpec(**json.loads(args.spec))
    read_links = None
    if args.links:
        from ralp.ps_strategy.netns import TaskLinks

        fields = json.loads(args.links)
        read_links = TaskLinks(fields["switch_namespace"],
                               tuple(tuple(pair) for pair in fields["hosts"]))  # fmt: skip
    try:
        record = horovod_bench_job(run, read_links)
    except Exception as e:  # the bench shows this line; the traceback goes to stderr
        import traceback

        traceback.print_exc()
        emit("error", f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e) else ''}")
        return 1
    if record is not None:
        emit("record", record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
