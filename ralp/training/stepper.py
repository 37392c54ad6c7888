"""Updates of a trainer outside ``fit``: the benchmark's measured windows, where the fit
loop's per-epoch work (callbacks, validation, agreeing to stop) must not fall inside the
timed steps. Every rank of an allreduce job makes the same stepper and runs the same
updates; a stepper's data goes on from where its last run stopped."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ralp.training.checkpoints import Position
from ralp.training.fit_inputs import fit_data
from ralp.training.objective import step_loss
from ralp.training.runtime import Runtime


@dataclass
class Steps:
    """What :meth:`Stepper.run` did: per update, when this process saw it finished
    (``time.perf_counter()``) and its loss over the whole update."""

    step_end_times: list[float] = field(default_factory=list)
    step_losses: list[float] = field(default_factory=list)


class Stepper:
    """Runs ``trainer``'s updates on ``x`` (arrays with ``y``, a dataset or a dataset
    function, as ``fit`` takes them), ``batch_size`` the global batch."""

    def __init__(self, trainer, x, y=None, *, batch_size: int, seed: int = 0,
                 shuffle: bool = False):
        from ralp.training.trainer import _label_spec

        self.runtime: Runtime = trainer.runtime
        runtime = self.runtime
        self.objective = trainer._objective(_label_spec(x, y))
        data = fit_data(x, y, sample_weight=None, class_weight=None, batch_size=batch_size,
                        steps_per_epoch=1, shuffle=shuffle, model=trainer.original,
                        loss=self.objective.loss, where="Stepper")
        runtime.check_data(data)
        sharding = runtime.sharding(data)
        self.position = Position(worker_batches=[0] * sharding.workers)
        runtime.begin(self.objective, data, sharding, seed, self.position)

    def run(self, updates: int, on_update=None) -> Steps:
        """Run ``updates`` updates; ``on_update(k)`` after the k-th (0-based). The losses are
        added up over the processes after the last update (a collective)."""
        steps, sums = Steps(), []

        def done(vector) -> bool:
            steps.step_end_times.append(time.perf_counter())
            sums.append(np.asarray(vector, np.float64))
            self.position.step += 1
            self.position.done += 1
            if on_update is not None:
                on_update(len(sums) - 1)
            return False

        self.runtime.run(updates, on_begin=lambda _: None, on_update=done, history=_Quiet())
        if sums:
            steps.step_losses = [step_loss(row) for row in self.runtime.reduce(np.stack(sums))]
        return steps

    def barrier(self) -> None:
        """Wait until every process gets here (a collective; nothing in a PS coordinator)."""
        self.runtime.barrier()


class _Quiet:
    """A history for runs outside ``fit``: what a runtime records into it is dropped."""

    duplicate_steps = 0

    def __init__(self):
        self.failures: list = []
        self.step_workers: list = []
        self.sync: list = []
        self.step_end_times: list = []
