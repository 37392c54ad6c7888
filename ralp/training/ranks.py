"""What the allreduce modes' runtimes share (horovod, stanza, collective): one process per
rank, every rank running the same script, the ranks in lockstep.

:class:`RankRuntime` is the part of the fit loop's runtime (:mod:`ralp.training.fit_loop`)
that does not depend on the collectives: each rank that reads data reads its share of
every global batch (:mod:`ralp.training.data`), runs one step per update, and sums are added
up, seeds shared and decisions agreed through the subclass's collectives. A subclass gives:
``rank``, ``size``, ``data_index`` (this rank's place among the ranks that read data, None
if it reads none), ``data_workers``, ``_sum(array)`` (over every rank),
``share_text(text)`` (rank 0's, on every rank), ``barrier()``, ``_build(objective)`` and
``_train(batch)`` (one step: this rank's sums), and the checkpoint parts
(:mod:`ralp.training.rank_checkpoints`).

Checkpoints (:class:`RankCheckpoints`): every rank writes its part, rank 0 commits; a job a
supervisor (:mod:`ralp.cluster.supervise`) restarted learns what was lost from
``RALP_RESTART_FAILURE`` and lists it in ``History.failures``; with ``RALP_SUPERVISED=1``
rank 0 reports each update done to the supervisor.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

import numpy as np

from ralp.errors import InvalidArgumentError
from ralp.training.checkpoints import Failure, TrainingState
from ralp.training.data import Sharding
from ralp.training.optimizer_state import OptimizerState

RESTART_FAILURE_ENV = "RALP_RESTART_FAILURE"  # set by a supervisor restarting the job
SUPERVISED_ENV = "RALP_SUPERVISED"  # "1": rank 0 reports each step done to the supervisor


class RankRuntime:
    """The lockstep part of an allreduce mode's runtime (the module's docstring)."""

    restart_timeout = 0.0
    fixed_batch = False  # stanza: every rank's batch has the same, fixed size
    plan = profile = None  # stanza: its plan; no rank mode keeps a profile
    step_function = None  # the traced step, for audits of its graph (set where it is built)

    def __init__(self):
        self.total_steps = 0
        self.objective = None
        self._built_for = None  # what the step was built for
        self._iterator = None
        self._position = None
        self.report = False

    is_chief = property(lambda self: self.rank == 0)

    @property
    def synchronous_workers(self) -> int:
        return self.data_workers

    def describe(self) -> str:
        return f"ranks={self.size}"

    def sharding(self, data) -> Sharding:
        return Sharding(self.data_workers, synchronous=True, drop_remainder=self.fixed_batch)

    def check_data(self, data) -> None:
        pass

    def shared_seed(self, seed: int | None) -> int:
        if seed is not None:
            return int(seed)
        mine = str(int(np.random.default_rng().integers(2**31)))
        return int(self.share_text(mine))

    def agree(self, flag: bool) -> bool:
        return bool(self._sum(np.array([float(flag)]))[0] > 0.5)

    def reduce(self, rows: np.ndarray) -> np.ndarray:
        return np.asarray(self._sum(np.asarray(rows, np.float64)), np.float64).reshape(rows.shape)

    def begin(self, objective, data, sharding: Sharding, seed: int, position) -> None:
        key = (objective, self._data_key(data, sharding))
        if key != self._built_for:
            self._build(objective, data)
            self.objective, self._built_for = objective, key
        self._position = position
        self._iterator = None
        if self.data_index is not None:
            self._iterator = iter(data.worker_dataset(sharding, self.data_index, seed=seed,
                                                      skip=position.done))
        self.report = os.environ.get(SUPERVISED_ENV) == "1" and self.rank == 0

    def _data_key(self, data, sharding: Sharding):
        """What of the data the step is built for, beside the objective (stanza: its
        batches' structure and size)."""
        return None

    def run(self, updates: int, *, on_begin, on_update, history) -> bool:
        """``updates`` steps on this rank; ``on_update(sums)`` after each (True: stop)."""
        for _ in range(updates):
            on_begin(0)
            batch = next(self._iterator) if self._iterator is not None else None
            sums = self._train(batch)
            self.total_steps += 1
            if self.report:  # a marker line, before the next collective: the supervisor
                from ralp._messages import emit  # knows the step a lost rank came at

                emit("step", self._position.done + 1)
            if on_update(sums):
                return True
        return False

    def recoverable(self, error: BaseException) -> bool:
        return False  # a lost rank ends the job: a supervisor restarts it whole

    def recover(self, error: BaseException, timeout: float) -> None:
        raise error  # never recoverable (above)

    def save_checkpoint(self, path: str) -> str:
        raise _parameter_server_only("save_checkpoint", self.mode)

    def restore_checkpoint(self, path: str) -> None:
        raise _parameter_server_only("restore_checkpoint", self.mode)

    def finish(self) -> None:
        """The fit is over (the collective runtime waits for every worker here)."""

    def steps_seen(self) -> int:
        return self._position.done if self._position is not None else 0

    def checkpoint_store(self, directory, every: int | None) -> RankCheckpoints:
        return RankCheckpoints(self, directory, every)

    def optimizer_template(self, template):
        cls, config = self.optimizer.__class__, self.optimizer.get_config()
        return lambda: cls.from_config(config)

    # ------------------------------------------------------------------ state

    def _read(self, variable) -> np.ndarray:
        """This replica's value of ``variable``."""
        return np.asarray(variable)

    def weights(self) -> list[np.ndarray]:
        """This replica's weights, in ``model.get_weights()`` order."""
        return [self._read(w) for w in self.model.weights]

    def optimizer_state(self) -> OptimizerState:
        return OptimizerState.read(self.optimizer, self.model.trainable_variables,
                                   read=self._read)

    def set_learning_rate(self, value: float) -> None:
        self.optimizer.learning_rate = value

    def sync_statistics(self) -> None:
        """Every replica's moving statistics (batch normalization's mean and variance: the
        model's non-trainable floating-point variables) set to their mean over the ranks,
        the value TensorFlow's MirroredStrategy reads from its replicas (a collective). Each
        replica updates them from its own rows; their updates are affine with the same
        coefficients on every replica, so averaging now does not change their mean later."""
        self._average(statistics_variables(self.model), self._sum, self.size)

    def _average(self, variables: list, total: Callable, count: int) -> None:
        """Set ``variables`` to their mean over ``count`` processes, ``total`` summing an array
        over them. The sum runs in float64: values equal on every process stay exact."""
        if not variables or count < 2:
            return
        values = [np.asarray(self._read(v), np.float64) for v in variables]
        mean = np.asarray(total(np.concatenate([v.ravel() for v in values])), np.float64) / count
        start = 0
        for variable, value in zip(variables, values, strict=True):
            size = value.size
            variable.assign(mean[start:start + size].reshape(value.shape).astype(
                np.dtype(variable.dtype)))
            start += size


class RankCheckpoints:
    """The checkpoints of one lockstep ``fit`` (:class:`ralp.training.rank_checkpoints.
    LockstepCheckpoints`), with the supervisor's restart noted."""

    def __init__(self, runtime: RankRuntime, directory, every: int | None):
        from ralp.training.rank_checkpoints import LockstepCheckpoints

        self.runtime = runtime
        self.store = LockstepCheckpoints(runtime, directory, every,
                                         runtime.checkpoint_fingerprint())
        self.directory, self.every = self.store.directory, every
        self.pending: Failure | None = None  # the restart's failure, until back where lost

    def save(self, state: TrainingState) -> None:
        state.fingerprint = self.store.fingerprint
        self.store.save(state)

    def restore(self) -> TrainingState | None:
        state = self.store.restore()
        if state is not None:
            self.runtime.total_steps = state.total_steps
        return state

    def restored(self, state: TrainingState | None, history) -> None:
        """Note the failure a supervisor restarted the job after (this process's first fit
        only), with the steps done again."""
        raw = os.environ.pop(RESTART_FAILURE_ENV, None)
        if not raw:
            return
        failure = Failure(**json.loads(raw))
        if any(f.detected_at == failure.detected_at for f in history.failures):
            return  # already recorded by an earlier restart
        done = state.position.done if state is not None and not state.finished else 0
        failure.restored_step = done
        failure.steps_redone = max(0, failure.at_step - done)
        failure.recovery_s = round(time.time() - failure.detected_at, 3)
        history.failures.append(failure)
        self.pending = failure
        self.step_done(done)

    def step_done(self, done: int) -> None:
        if self.pending is not None and done >= self.pending.at_step:
            self.pending.time_lost_s = round(time.time() - self.pending.detected_at, 3)
            self.pending = None
        if self.store.pending:  # stanza: the tail copies crossed during this step
            self.store.finish()

    def finish(self) -> None:
        self.store.finish()


def statistics_variables(model) -> list:
    """The model's variables that training updates without gradients, so replicas can
    drift apart: its non-trainable floating-point variables (batch normalization's moving
    mean and variance; a frozen layer's weights, equal everywhere, average to themselves)."""
    return [v for v in model.non_trainable_weights
            if np.issubdtype(np.dtype(v.dtype), np.floating)]


def _parameter_server_only(name: str, mode: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{name} is for the parameter-server modes; in mode {mode!r} checkpoint with "
        "fit(checkpoint_dir=...), or save the model with trainer.unwrap().save(path)")
