"""One benchmark run in mode ``horovod`` or ``stanza``, as each Horovod rank runs it.

    python -m ralp.bench.horovod_job --spec RUN_JSON [--links LINKS_JSON]

Started on every rank by :func:`ralp.horovod.launch.launch` (``horovodrun``, or the netns
Gloo driver). Every rank builds the same zoo model, warms up (each rank traces and runs its
step), then runs the measured steps. In mode ``stanza`` the first ``workers`` ranks are the
CONV ranks (they read data) and the last ``ps`` ranks the FC ranks (their links are the
record's ``ps:`` links). Rank 0 reads the link counters right before and after
the measured steps (behind an allreduce barrier, so every rank's traffic is inside the
window), then once more after an idle second (Horovod's control-plane rate), and sends
progress and the run's figures as messages (:mod:`ralp._messages`).

The figures have the same fields as the PS modes' (:func:`ralp.bench.ps_job.bench_job`).
"""

from __future__ import annotations

import sys

from ralp import modes as registry
from ralp._compat import exit_without_teardown
from ralp._messages import emit
from ralp.bench.rank_job import measured_window, rank_main, window_figures
from ralp.bench.rank_job import rank_command as job_command


def horovod_bench_job(run, read_links=None, started: float | None = None,
                      read_cpu=None) -> dict | None:
    """Measure ``run`` (a RunSpec in mode ``horovod`` or ``stanza``) on this Horovod job;
    rank 0 returns the run's figures, other ranks None."""
    from ralp.bench.ps_job import SetupClock, dataset_fn_for

    clock = SetupClock(started)
    import horovod.tensorflow as hvd
    import keras

    from ralp.models import build_model

    stanza = registry.MODES[run.mode].family == registry.LAYER_SPLIT
    hvd.init(process_sets="dynamic" if stanza else None)
    clock.lap("rank_start")
    rank, size = hvd.rank(), hvd.size()
    if size != run.workers + run.ps:
        raise RuntimeError(f"the run asks for {run.workers + run.ps} ranks but Horovod started "
                           f"{size}")
    W = run.workers  # the ranks that read data (CONV ranks in stanza)
    keras.utils.set_random_seed(run.seed)  # rank 0's initial weights are broadcast anyway
    model = build_model(run.model, num_classes=run.num_classes, image_size=run.image_size)
    clock.lap("build_model")

    say = emit if rank == 0 else (lambda kind, value: None)
    say("phase", "warm-up")
    import ralp
    from ralp.training.stepper import Stepper

    # run.batch_size is one rank's batch (the papers' per-GPU batch)
    trainer = ralp.wrap(model, mode=run.mode, optimizer=keras.optimizers.SGD(learning_rate=1e-3),
                        batch_size=run.batch_size * W, **({"fc_workers": run.ps} if stanza else {}))
    clock.lap("place")
    # The same dataset function as the PS modes; a rank reads its shard as a worker would.
    stepper = Stepper(trainer, dataset_fn_for(run), batch_size=run.batch_size * W, seed=run.seed)
    stepper.run(max(run.warmup, 1))
    stepper.barrier()
    clock.lap("warmup")

    window = measured_window(stepper, run, rank, read_links, read_cpu, say)
    final_loss = window["history"].step_losses[-1]
    if rank != 0:
        return None
    return {
        **run.to_dict(),
        **_prediction(run, model, trainer.runtime if stanza else None),
        "setup": clock.phases,
        **window_figures(run, window),
        "final_loss": final_loss,
    }


def _prediction(run, model, stanza_trainer) -> dict:
    """The profiler's verdict and the byte model's figures for rank 0's record: per worker
    batch, a worker's (CONV rank's) link and, for Stanza, the FC ranks' links."""
    from ralp.profiler.api import profile
    from ralp.profiler.bytes_model import mode_traffic

    prof = profile(model, run.batch_size, workers=run.workers, ps=1)
    fields = {"profiler_verdict": prof.verdict, "skewness": prof.skewness}
    if stanza_trainer is None:
        predicted = prof.bytes_per_step[registry.MODES[run.mode].bytes_key]
        return {**fields, "offloaded_layers": [], "split_after": None,
                "bytes_per_step_predicted": float(predicted.worker_link.total),
                "ps_bytes_per_step_predicted": None}
    plan = stanza_trainer.plan
    predicted = mode_traffic(prof.table, registry.MODES[run.mode].bytes_key, run.workers, run.ps, plan.offloaded)
    fc_bytes = sum(link.total for link in predicted.ps_links) / run.workers
    return {**fields, "offloaded_layers": list(plan.offloaded), "split_after": plan.split_after,
            "bytes_per_step_predicted": float(predicted.worker_link.total),
            "ps_bytes_per_step_predicted": float(fc_bytes)}


def rank_command(run, links=None, started: float | None = None, cpu=None) -> list[str]:
    """The command every rank runs for ``run`` (:func:`ralp.bench.rank_job.rank_command`)."""
    return job_command("ralp.bench.horovod_job", run, links, started, cpu)


def main(argv: list[str] | None = None) -> int:
    from ralp.emulation.devices import join_rank_group

    # join_rank_group first: the job's work runs inside the device's budget
    code = rank_main("python -m ralp.bench.horovod_job", horovod_bench_job, argv,
                     before=join_rank_group)
    if code:
        return code
    _exit_together()
    return 0


def _exit_together() -> None:
    """Every rank leaves at once, after a last barrier, without the interpreter's teardown of
    TensorFlow (which can take seconds per rank). Horovod is shut down first: its background
    loop keeps exchanging with the other ranks after the barrier, and a rank whose peer has
    already left aborts on the closed connection (gloo::IoException), failing the run after
    its record."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.allreduce(tf.constant(0.0), op=hvd.Sum, name="ralp_exit")
    hvd.shutdown()  # every rank leaves the loop in the same cycle; then no one talks
    exit_without_teardown()


if __name__ == "__main__":
    sys.exit(main())
