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

The figures have the same fields as the PS modes' (:func:`ralp.bench.job.bench_job`).
"""

from __future__ import annotations

import os
import sys
import time

from ralp._messages import emit
from ralp.bench.rank_job import rank_command as job_command
from ralp.bench.rank_job import rank_main

CONTROL_WINDOW_S = 1.0  # idle seconds over which Horovod's control-plane rate is measured


def horovod_bench_job(run, read_links=None, started: float | None = None,
                      read_cpu=None) -> dict | None:
    """Measure ``run`` (a RunSpec in mode ``horovod`` or ``stanza``) on this Horovod job;
    rank 0 returns the run's figures, other ranks None."""
    from ralp.bench.job import SetupClock, dataset_fn_for

    clock = SetupClock(started)
    import horovod.tensorflow as hvd
    import keras
    import tensorflow as tf

    from ralp.bench.measure import (
        PROGRESS_EVERY,
        control_plane_figures,
        cpu_window,
        link_figures,
        timing,
    )
    from ralp.models import build_model

    stanza = run.mode == "stanza"
    hvd.init(process_sets="dynamic" if stanza else None)
    clock.lap("rank_start")
    rank, size = hvd.rank(), hvd.size()
    if size != run.workers + run.ps:
        raise RuntimeError(f"the run asks for {run.workers + run.ps} ranks but Horovod started "
                           f"{size}")
    W, B = run.workers, run.batch_size  # W: the ranks that read data (CONV ranks in stanza)
    keras.utils.set_random_seed(run.seed)  # rank 0's initial weights are broadcast anyway
    model = build_model(run.model, num_classes=run.num_classes, image_size=run.image_size)
    clock.lap("build_model")

    say = emit if rank == 0 else (lambda kind, value: None)
    say("phase", "warm-up")
    trainer, reads_data = _trainer(run, hvd, model, keras.optimizers.SGD(learning_rate=1e-3))
    clock.lap("place")
    # The same dataset function as the PS modes; a rank reads its shard as a worker would.
    batches = dataset_fn_for(run)(tf.distribute.InputContext(W, rank, W)) if reads_data else None
    trainer.run_steps(batches, max(run.warmup, 1))
    trainer.barrier()
    clock.lap("warmup")

    say("phase", "measuring")
    before = dict(read_links()) if read_links and rank == 0 else None
    cpu_before = read_cpu() if read_cpu and rank == 0 else None
    start = time.perf_counter()

    def on_step(k: int, _loss) -> None:
        if (k + 1) % PROGRESS_EVERY == 0:
            say("step", (k + 1) * W)  # worker batches done, as the PS modes count steps

    history = trainer.run_steps(batches, run.steps, on_step=on_step)
    trainer.barrier()
    cpu_after = read_cpu() if read_cpu and rank == 0 else None
    after = dict(read_links()) if read_links and rank == 0 else None
    if read_links:
        # Horovod's background thread coordinates every cycle, tensors or not: a
        # time-proportional control plane the byte model (payload) does not count. Every
        # rank idles for the same window so rank 0 can measure its rate on each link.
        time.sleep(CONTROL_WINDOW_S)
        idle = dict(read_links()) if rank == 0 else None
        trainer.barrier()
    final_loss = history.final_loss if stanza else history.step_losses[-1]
    if rank != 0:
        return None

    steps = run.measured_steps  # worker batches: steps per worker x workers
    # All ranks finish a step together (a collective): one end time per worker batch.
    end_times = [t for t in history.step_end_times for _ in range(W)]
    return {
        **run.to_dict(),
        **_prediction(run, model, trainer if stanza else None),
        "setup": clock.phases,
        "wall_s": history.step_end_times[-1] - start,
        "measured_steps": steps,
        **timing(end_times, start, steps, W, B),
        "final_loss": final_loss,
        **link_figures(before, after, steps),
        **(control_plane_figures(after, idle, CONTROL_WINDOW_S) if read_links else {}),
        **cpu_window(cpu_before, cpu_after),
    }


def _trainer(run, hvd, model, optimizer):
    """The run's trainer on this rank, and whether this rank reads data."""
    if run.mode == "stanza":
        from ralp.horovod.stanza import StanzaTrainer

        trainer = StanzaTrainer(hvd, model, optimizer, fc_workers=run.ps,
                                batch_size=run.batch_size)
        return trainer, not trainer.is_fc
    from ralp.horovod.trainer import HorovodTrainer

    return HorovodTrainer(hvd, model, optimizer), True


def _prediction(run, model, stanza_trainer) -> dict:
    """The profiler's verdict and the byte model's figures for rank 0's record: per worker
    batch, a worker's (CONV rank's) link and, for Stanza, the FC ranks' links."""
    from ralp.profiler.api import profile
    from ralp.profiler.bytes_model import mode_traffic

    prof = profile(model, run.batch_size, workers=run.workers, ps=1)
    fields = {"profiler_verdict": prof.verdict, "skewness": prof.skewness}
    if stanza_trainer is None:
        predicted = prof.bytes_per_step["horovod"]
        return {**fields, "offloaded_layers": [], "split_after": None,
                "bytes_per_step_predicted": float(predicted.worker_link.total),
                "ps_bytes_per_step_predicted": None}
    plan = stanza_trainer.plan
    predicted = mode_traffic(prof.table, "stanza", run.workers, run.ps, plan.offloaded)
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
    TensorFlow and Horovod: that teardown took 2 to 20 s per job (measured on 4 ranks)."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.allreduce(tf.constant(0.0), op=hvd.Sum, name="ralp_exit")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
