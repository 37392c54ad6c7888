"""Stanza's compute phases measured under Horovod on this host (shared host only).

On the simulated cluster every Horovod rank shares this host's cores, and a rank that waits
in a collective is not idle: Horovod's background thread and Gloo's transport keep polling,
mostly in the kernel. Stanza's phases are exactly that: the FC rank computes while every
CONV rank waits, then the CONV ranks compute while the FC rank waits. A calibration in one
process (:mod:`ralp.planner.calibration`) sees none of it, so on the shared host its phases
run longer than their calibrated times.

So the calibration measures both phases with the real library: ``RANKS`` ranks started by
``horovodrun`` on loopback, the last one the FC rank. First the FC rank times its tail on the
CONV ranks' batches stacked while they wait in an allreduce; then the CONV ranks run the
head's step together while the FC rank waits. Each phase's time per step is its wall-clock
window (from a barrier to the last rank done) over the steps. No bytes cross in either phase:
the exchange and the rings are the model's byte phases.

Run as a module, it is one rank of that measurement (``horovodrun ... python -m
lab.planner.stanza_phases_probe``); rank 0 prints the figures as one marked JSON line.
"""

from __future__ import annotations

import json
import sys
import time

from lab.planner.allreduce import horovodrun_path, run_probe

RANKS = 4  # a simulated cluster of N = 4: three CONV ranks and one FC rank
BESIDE_STEPS = 8
MARK = "RALP_STANZA_BESIDE "
PROBE_TIMEOUT_S = 600.0


def probe_command(model: str, batch_size: int, image_size: int, num_classes: int,
                  steps: int, ranks: int = RANKS) -> list[str]:
    return [horovodrun_path(), "-np", str(ranks), "-H", f"localhost:{ranks}", "--gloo",
            sys.executable, "-m", "lab.planner.stanza_phases_probe", model, str(batch_size),
            str(image_size), str(num_classes), str(steps)]


def measure_beside(model: str, batch_size: int, image_size: int, num_classes: int, *,
                   steps: int = BESIDE_STEPS, ranks: int = RANKS) -> dict:
    """{"conv_ranks", "heads_s", "tail_s"}: the seconds per step of the CONV ranks' heads
    together (the FC rank waiting) and of the FC rank's tail on their stacked batches (the
    CONV ranks waiting), measured under Horovod on this host. ``model``: a zoo name or a
    saved ``.keras`` path (:func:`ralp.planner.calibration.load_source`)."""
    command = probe_command(model, batch_size, image_size, num_classes, steps, ranks)
    return run_probe(command, MARK, "the Stanza phase probe", PROBE_TIMEOUT_S)


def _window(hvd, tf, run, steps: int, name: str) -> float:
    """Seconds per step of ``run`` (None: this rank waits) over a window every rank enters at
    a barrier; the window ends when the last rank is done (every rank's elapsed, gathered)."""
    hvd.allreduce(tf.constant(0.0), name=f"{name}_start")
    start = time.perf_counter()
    if run is not None:
        for _ in range(steps):
            run()
    elapsed = time.perf_counter() - start if run is not None else 0.0
    every = hvd.allgather(tf.constant([elapsed], tf.float64), name=f"{name}_done").numpy()
    return float(every.max()) / steps


def _rank_main(model_name: str, batch_size: int, image_size: int, num_classes: int,
               steps: int) -> None:
    import horovod.tensorflow as hvd
    import numpy as np
    import tensorflow as tf

    from ralp.placement.plan import Plan
    from ralp.placement.rewriter import PlacedModel, split_model
    from ralp.planner.calibration import (
        CALIBRATION_WARMUP,
        head_step,
        load_source,
        random_inputs,
        train_step,
    )
    from ralp.planner.workload import Workload
    from ralp.profiler.api import profile

    hvd.init()
    model = load_source(model_name, num_classes, image_size)
    work = Workload(profile(model, batch_size))
    if not work.offloaded:
        raise SystemExit(f"{model_name} has no layers to put on an FC rank")
    plan = Plan.offloading(tuple(r.name for r in work.table.rows), list(work.offloaded), 1)
    split = split_model(PlacedModel(model, plan, {}))
    rng = np.random.default_rng(hvd.rank())
    conv = hvd.size() - 1
    if hvd.rank() == conv:  # the FC rank: its group's batches stacked
        step = train_step(split.tail, boundary_gradient=True)
        x = random_inputs(split.tail, conv * batch_size, rng)
        y = tf.constant(rng.integers(0, num_classes, conv * batch_size), tf.int32)
        run = lambda: step(x, y)[0].numpy()  # noqa: E731
    else:
        step = head_step(split.head, batch_size, rng)
        x = random_inputs(model, batch_size, rng)
        run = lambda: step(x).numpy()  # noqa: E731
    for _ in range(CALIBRATION_WARMUP):
        run()
    tail_s = _window(hvd, tf, run if hvd.rank() == conv else None, steps, "ralp_beside_tail")
    heads_s = _window(hvd, tf, None if hvd.rank() == conv else run, steps, "ralp_beside_heads")
    if hvd.rank() == 0:
        print(MARK + json.dumps({"conv_ranks": conv, "heads_s": heads_s, "tail_s": tail_s}),
              flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    _rank_main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
               int(sys.argv[5]))
