"""One benchmark run in ``horovod`` mode, as each Horovod rank runs it.

    python -m ralp.bench.horovod_job --spec RUN_JSON [--links LINKS_JSON]

Started on every rank by :func:`ralp.horovod.launch.launch` (``horovodrun``, or the netns
Gloo driver). Every rank builds the same zoo model, warms up (each rank traces and runs its
step), then runs the measured steps. Rank 0 reads the link counters right before and after
the measured steps (behind an allreduce barrier, so every rank's traffic is inside the
window) and sends progress and the run's figures as messages (:mod:`ralp.horovod.messages`).

The figures have the same fields as the PS modes' (:func:`ralp.bench.job.bench_job`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ralp.horovod.messages import emit


def horovod_bench_job(run, read_links=None, started: float | None = None) -> dict | None:
    """Measure ``run`` (a RunSpec in mode ``horovod``) on this Horovod job; rank 0 returns
    the run's figures, other ranks None."""
    from ralp.bench.job import SetupClock, dataset_fn_for

    clock = SetupClock(started)
    import horovod.tensorflow as hvd
    import keras
    import tensorflow as tf

    from ralp.bench.measure import PROGRESS_EVERY, link_figures, timing
    from ralp.horovod.trainer import HorovodTrainer
    from ralp.models import build_model
    from ralp.profiler.api import profile

    hvd.init()
    clock.lap("rank_start")
    rank, size = hvd.rank(), hvd.size()
    if size != run.workers:
        raise RuntimeError(f"the run asks for {run.workers} workers but Horovod started {size}")
    W, B = run.workers, run.batch_size
    keras.utils.set_random_seed(run.seed)  # rank 0's initial weights are broadcast anyway
    model = build_model(run.model, num_classes=run.num_classes, image_size=run.image_size)
    # The verdict and the byte model of this run, for rank 0's record.
    prof = profile(model, B, workers=W, ps=1) if rank == 0 else None
    clock.lap("build_model")

    say = emit if rank == 0 else (lambda kind, value: None)
    say("phase", "warm-up")
    trainer = HorovodTrainer(hvd, model, keras.optimizers.SGD(learning_rate=1e-3))
    clock.lap("place")
    # The same dataset function as the PS modes; a rank reads its shard as a worker would.
    batches = dataset_fn_for(run)(tf.distribute.InputContext(size, rank, size))
    trainer.fit(batches, max(run.warmup, 1))
    trainer.barrier()
    clock.lap("warmup")

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
    predicted = prof.bytes_per_step["horovod"]
    return {
        **run.to_dict(),
        "offloaded_layers": [],
        "split_after": None,
        "profiler_verdict": prof.verdict,
        "skewness": prof.skewness,
        "setup": clock.phases,
        "wall_s": history.step_end_times[-1] - start,
        "measured_steps": steps,
        **timing(end_times, start, steps, W, B),
        "bytes_per_step_predicted": float(predicted.worker_link.total),
        "ps_bytes_per_step_predicted": None,
        "final_loss": history.step_losses[-1],
        **link_figures(before, after, steps),
    }


def rank_command(run, links=None, started: float | None = None) -> list[str]:
    """The command every rank runs for ``run``; ``links`` a TaskLinks on the netns backend."""
    command = [sys.executable, "-m", "ralp.bench.horovod_job",
               "--spec", json.dumps(run.to_dict(), separators=(",", ":"))]  # fmt: skip
    if links is not None:
        fields = {"switch_namespace": links.switch_namespace, "hosts": [list(h) for h in links.hosts]}
        command += ["--links", json.dumps(fields, separators=(",", ":"))]
    if started is not None:
        command += ["--started", repr(started)]
    return command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ralp.bench.horovod_job")
    parser.add_argument("--spec", required=True, help="the RunSpec as JSON")
    parser.add_argument("--links", help="netns link counters: TaskLinks fields as JSON")
    parser.add_argument("--started", type=float, help="time.time() when the run was launched")
    args = parser.parse_args(argv)

    from ralp._cli import quiet_tensorflow
    from ralp.bench.runspec import RunSpec

    quiet_tensorflow()
    run = RunSpec(**json.loads(args.spec))
    read_links = None
    if args.links:
        from ralp.cluster.counters import TaskLinks

        fields = json.loads(args.links)
        read_links = TaskLinks(fields["switch_namespace"],
                               tuple(tuple(pair) for pair in fields["hosts"]))  # fmt: skip
    try:
        figures = horovod_bench_job(run, read_links, args.started)
    except Exception as e:  # the bench shows this line; the traceback goes to stderr
        import traceback

        traceback.print_exc()
        emit("error", f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e) else ''}")
        return 1
    if figures is not None:
        emit("record", figures)
    _exit_together()
    return 0


def _exit_together() -> None:
    """Every rank leaves at once, after a last barrier, without the interpreter's teardown of
    TensorFlow and Horovod: that teardown took 2 to 20 s per job (measured on 4 ranks)."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.allreduce(tf.constant(0.0), op=hvd.Sum, name="ralp_exit")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
