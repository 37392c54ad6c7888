"""One benchmark run in mode ``collective``, as each worker runs it.

    python -m ralp.bench.collective_job --spec RUN_JSON [--links LINKS_JSON] [--cpu CPU_JSON]

Started on every worker by :func:`ralp.collective.launch.launch` with the worker's
``TF_CONFIG``. Every worker makes the strategy first (TensorFlow's collectives are configured
at its start), builds the zoo model inside its scope, warms up, then runs the measured steps.
Worker 0 reads the link counters right before and after the measured steps (behind a
collective barrier, so every worker's traffic is inside the window), then once more after an
idle second (the coordination service's heartbeats), and sends progress and the run's figures
as messages (:mod:`ralp._messages`). The figures have the same fields as the other
modes'.
"""

from __future__ import annotations

import sys

from ralp import modes as registry
from ralp._compat import exit_without_teardown
from ralp._messages import emit
from ralp.bench.rank_job import measured_window, rank_command, rank_main, window_figures


def collective_bench_job(run, read_links=None, started: float | None = None,
                         read_cpu=None) -> dict | None:
    """Measure ``run`` (a RunSpec in mode ``collective``) on this worker; worker 0 returns the
    run's figures, the others None."""
    from ralp.bench.ps_job import SetupClock, dataset_fn_for

    clock = SetupClock(started)
    from ralp.collective.runtime import CollectiveRuntime, make_strategy

    strategy = make_strategy(timeout_s=None)
    clock.lap("rank_start")
    import keras

    from ralp.models import build_model
    from ralp.training.stepper import Stepper
    from ralp.training.trainer import Trainer

    def build():
        keras.utils.set_random_seed(run.seed)  # worker 0's initial values are broadcast
        return build_model(run.model, num_classes=run.num_classes, image_size=run.image_size)

    runtime = CollectiveRuntime.from_model(build, keras.optimizers.SGD(learning_rate=1e-3),
                                           strategy=strategy)
    trainer = Trainer(runtime, runtime.setup, runtime.original)
    rank, W = runtime.rank, runtime.size
    if run.workers != W:
        raise RuntimeError(f"the run asks for {run.workers} workers but the job has {W}")
    clock.lap("place")
    say = emit if rank == 0 else (lambda kind, value: None)
    say("phase", "warm-up")
    stepper = Stepper(trainer, dataset_fn_for(run), batch_size=run.batch_size * W, seed=run.seed)
    stepper.run(max(run.warmup, 1))
    stepper.barrier()
    clock.lap("warmup")

    window = measured_window(stepper, run, rank, read_links, read_cpu, say)
    runtime.leave_together()
    if rank != 0:
        return None
    return {
        **run.to_dict(),
        **_prediction(run, runtime.model),
        "setup": clock.phases,
        **window_figures(run, window),
        "final_loss": window["history"].step_losses[-1],
    }


def _prediction(run, model) -> dict:
    """The profiler's verdict and the byte model's figures for worker 0's record: per worker
    batch, a worker's link (a ring allreduce of the trainable variables)."""
    from ralp.profiler.api import profile
    from ralp.profiler.bytes_model import mode_traffic

    prof = profile(model, run.batch_size, workers=run.workers, ps=1)
    predicted = mode_traffic(prof.table, registry.MODES[run.mode].bytes_key, run.workers)
    return {"profiler_verdict": prof.verdict, "skewness": prof.skewness,
            "offloaded_layers": [], "split_after": None,
            "bytes_per_step_predicted": float(predicted.worker_link.total),
            "ps_bytes_per_step_predicted": None}


def job_command(run, links=None, started: float | None = None, cpu=None) -> list[str]:
    """The command every worker runs for ``run`` (:func:`ralp.bench.rank_job.rank_command`)."""
    return rank_command("ralp.bench.collective_job", run, links, started, cpu)


def main(argv: list[str] | None = None) -> int:
    code = rank_main("python -m ralp.bench.collective_job", collective_bench_job, argv)
    if code:
        return code
    # Every worker is done with its collectives (leave_together above); skip the
    # interpreter's teardown of TensorFlow's servers, which cannot stop cleanly.
    exit_without_teardown()


if __name__ == "__main__":
    sys.exit(main())
