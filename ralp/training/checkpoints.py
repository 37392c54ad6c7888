"""Checkpoints that ``fit`` writes and resumes from: every variable, and where training was.

A checkpoint is TensorFlow's (``tf.train.Checkpoint`` of the placed model, its layer state and
the optimizers, kept by ``tf.train.CheckpointManager``): it reads each variable from the task
it lives on, the offloaded layers and their optimizer slots on their PS task included. Beside
it, ``ckpt-<n>.ralp.json`` holds what TensorFlow does not: the position in the fit (epoch, step,
batches each worker's input gave), the per-epoch figures so far, the failures survived, and a
fingerprint of the model, so that a checkpoint of another model is refused with a reason.

``fit`` saves only between steps (the loop waits for the steps in flight first), so no step is
half-applied in a checkpoint. The JSON is written after TensorFlow's files, so a checkpoint
without one (a crash in between) is skipped.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ralp.errors import InvalidArgumentError, RalpError

STATE_VERSION = 2
KEEP = 3  # checkpoints kept in the directory


class CheckpointError(RalpError, ValueError):
    """A checkpoint that cannot be used here (another model, missing, unreadable)."""


@dataclass
class Position:
    """Where a fit is: epoch, updates done in it and in the whole fit, the data position
    (batches each worker's input has given since the fit began), and the epoch's running
    figures so far (:class:`ralp.training.objective.EpochSums`: its loss and the metrics'
    state cover every step of it, across restarts)."""

    epoch: int = 0
    step: int = 0
    done: int = 0
    worker_batches: list[int] = field(default_factory=list)
    epoch_sums: dict | None = None


@dataclass
class Failure:
    """A failure survived during ``fit``, in ``History.failures``.

    ``kind`` "ps": the task was lost, training waited for its restart, reconnected and went
    on from the checkpoint at ``restored_step``; the steps after it were done again
    (``steps_redone``). ``kind`` "worker": a worker was lost and its steps were rerun by the
    others (``steps_redone`` None: the rerun of a step it had applied is skipped, see
    ``History.duplicate_steps``). Steps count from the start of the fit. A step failing
    again from the same lost task before training is back at ``at_step`` (a worker's
    connection to the restarted PS still waiting out gRPC's reconnect backoff) is part of this
    failure: ``reconnects`` counts the recoveries it took, ``steps_redone`` all their steps.
    """

    task: str
    kind: str
    at_step: int
    detected_at: float  # time.time()
    restored_step: int | None = None
    steps_redone: int | None = None
    recovery_s: float | None = None  # detected -> training again
    time_lost_s: float | None = None  # detected -> back at at_step
    message: str = ""
    reconnects: int = 1


class Recoveries:
    """The failures ``fit`` recovers from, into ``history.failures``, each timed until training
    is back at the step where it was lost."""

    def __init__(self, history) -> None:
        self.history = history
        self._pending: list[tuple[Failure, float]] = []  # (failure, perf_counter at detection)

    def record(self, failure: Failure, clock: float) -> Failure:
        """Record ``failure``, or fold it into the same task's failure still being recovered
        from: one lost task, however many reconnects it took to train past it again."""
        for earlier, _ in self._pending:
            if earlier.task == failure.task:
                earlier.reconnects += 1
                earlier.restored_step = failure.restored_step
                earlier.steps_redone = (earlier.steps_redone or 0) + (failure.steps_redone or 0)
                earlier.recovery_s = (earlier.recovery_s or 0.0) + (failure.recovery_s or 0.0)
                earlier.message += f"; then, reconnecting: {failure.message}"
                return earlier
        self.history.failures.append(failure)
        self._pending.append((failure, clock))
        return failure

    def note_time_lost(self, done: int) -> None:
        """``done`` steps trained: failures lost at or before it are recovered from."""
        for failure, clock in list(self._pending):
            if done >= failure.at_step:
                failure.time_lost_s = time.perf_counter() - clock
                self._pending.remove((failure, clock))


@dataclass
class TrainingState:
    """What ``ckpt-<n>.ralp.json`` holds."""

    fingerprint: dict
    position: Position
    total_steps: int  # steps trained by this model over all fits (the checkpoint's number)
    finished: bool = False  # the fit that wrote it completed
    epoch_logs: dict[str, list[float]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    version: int = STATE_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> TrainingState:
        raw = json.loads(text)
        if raw.get("version") != STATE_VERSION:
            raise CheckpointError(f"checkpoint state version {raw.get('version')!r}, expected "
                                  f"{STATE_VERSION}")
        raw["position"] = Position(**raw["position"])
        raw["failures"] = [Failure(**f) for f in raw["failures"]]
        return cls(**raw)


def fingerprint(model, optimizers: dict, mode: str) -> dict:
    """What a checkpoint must match to be restored: the model's variables and the optimizers."""
    return {
        "model": model.name,
        "mode": mode,
        "variables": [f"{v.path}:{list(v.shape)}" for v in model.weights],
        "optimizers": sorted(optimizers),
    }


def describe_mismatch(saved: dict, current: dict) -> str:
    if saved["variables"] != current["variables"]:
        ours, theirs = set(current["variables"]), set(saved["variables"])
        example = sorted(theirs - ours)[:2] or sorted(ours - theirs)[:2]
        return (f"model {saved['model']!r} with {len(theirs)} variables, not this "
                f"{current['model']!r} with {len(ours)} (e.g. {', '.join(example)})")
    return (f"mode {saved['mode']!r} with optimizers {saved['optimizers']}, not mode "
            f"{current['mode']!r} with {current['optimizers']}")


class Checkpointer:
    """The checkpoints of one ``fit`` in ``directory``, written every ``every`` steps."""

    def __init__(self, directory: str | os.PathLike, every: int | None):
        if every is not None and (not isinstance(every, int) or every < 1):
            raise InvalidArgumentError(f"checkpoint_every must be a positive number of steps, got {every!r}")
        self.directory = Path(directory)
        self.every = every
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CheckpointError(f"cannot use checkpoint_dir {str(directory)!r}: {e}") from None

    def _manager(self, checkpoint):
        import tensorflow as tf

        return tf.train.CheckpointManager(checkpoint, str(self.directory), max_to_keep=KEEP)

    def save(self, checkpoint, state: TrainingState) -> str:
        manager = self._manager(checkpoint)
        prefix = manager.save(checkpoint_number=state.total_steps)
        tmp = Path(f"{prefix}.ralp.json.tmp")
        tmp.write_text(state.to_json())
        tmp.replace(f"{prefix}.ralp.json")
        kept = {f"{p}.ralp.json" for p in manager.checkpoints}
        for old in self.directory.glob("ckpt-*.ralp.json"):
            if str(old) not in kept:
                old.unlink(missing_ok=True)
        return prefix

    def latest(self, checkpoint) -> tuple[str, TrainingState] | None:
        """The newest checkpoint with its state, or None when there is none."""
        for prefix in reversed(self._manager(checkpoint).checkpoints):
            state_file = Path(f"{prefix}.ralp.json")
            if state_file.exists():
                try:
                    return prefix, TrainingState.from_json(state_file.read_text())
                except (ValueError, KeyError, TypeError) as e:
                    raise CheckpointError(f"{state_file} is not a ralp checkpoint state ({e}); "
                                          "use another checkpoint_dir") from None
        return None


def read_checkpoint(checkpoint, prefix: str) -> None:
    """Restore ``checkpoint`` from ``prefix``, every saved value matched, or a clear error."""
    import tensorflow as tf

    try:
        checkpoint.read(prefix).assert_consumed()
    except tf.errors.NotFoundError:
        raise CheckpointError(f"no checkpoint at {prefix!r}") from None
    except (AssertionError, ValueError, tf.errors.OpError) as e:
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"the checkpoint at {prefix!r} does not fit this model (was it "
                              f"written by another model or mode?): {first}") from None
