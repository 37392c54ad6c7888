"""Checkpoints of the lockstep trainers (Horovod's, Stanza's, the collective one).

Every rank calls the same ``save`` and ``restore`` at the same step (the ranks run in
lockstep, so saves fall between steps on all of them and no step is half-applied). Who writes
what is the trainer's call (``checkpoint_parts``): rank 0 the whole replica for Horovod and
the collective trainer; for Stanza CONV rank 0 the head, each FC rank its tail, and each FC
rank's CONV peer the copy of that tail it was sent. Each part is one ``.npz`` of named arrays
(the variables and optimizer variables, read from this rank's own replica, so that no
distributed variable starts a collective on one rank only), written to a temporary name and
renamed.

A checkpoint is complete when its ``ckpt-<n>.ralp.json`` (the same state file as the PS
trainer's: :class:`ralp.training.checkpoints.TrainingState`) exists. Rank 0 writes it after a
barrier that follows every rank's parts (for Stanza, after the step that follows, while which
the FC ranks' copies crossed), so a rank lost halfway leaves the previous checkpoint the newest
complete one. On ``restore`` rank 0 picks the newest complete checkpoint and shares
its state with every rank, so all agree on the step; each trainer then reads its parts and
broadcasts them (``restore_parts``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ralp.training.checkpoints import KEEP, CheckpointError, TrainingState, describe_mismatch

STATE = re.compile(r"ckpt-(\d+)\.ralp\.json$")


def named_variables(prefix: str, variables: Sequence) -> list[tuple[str, object]]:
    """``(key, variable)`` pairs whose keys are unique and say which variable: the prefix, the
    position and Keras' path."""
    return [(f"{prefix}/{k:04d}/{getattr(v, 'path', v.name)}", v) for k, v in enumerate(variables)]


def part_variables(prefix: str, variables: Sequence, optimizer) -> list[tuple[str, object]]:
    """A checkpoint part's named variables: ``variables`` and the state of the ``optimizer``
    that trains them."""
    return named_variables(prefix, variables) + named_variables("optimizer", optimizer.variables)


def lockstep_fingerprint(model, optimizer, mode: str) -> dict:
    """What a lockstep checkpoint must match: the model's variables, the optimizer, the mode."""
    from ralp.training.checkpoints import fingerprint

    return fingerprint(model, {type(optimizer).__name__: optimizer}, mode)


def read_arrays(named: Sequence[tuple[str, object]], read: Callable = np.asarray) -> dict:
    """The values of ``named`` variables as numpy arrays, by key."""
    # copies: a snapshot another thread may send while the next step updates the variables
    return {key: np.array(read(v), copy=True) for key, v in named}


def assign_arrays(named: Sequence[tuple[str, object]], arrays: dict, part: str) -> None:
    """Assign ``arrays`` to ``named`` variables, every key and shape matched, or a
    :class:`CheckpointError` saying which does not."""
    keys = [key for key, _ in named]
    if sorted(keys) != sorted(arrays):
        missing = sorted(set(keys) - set(arrays))[:2] or sorted(set(arrays) - set(keys))[:2]
        raise CheckpointError(f"checkpoint part {part!r} holds {len(arrays)} arrays, this model "
                              f"{len(keys)} (e.g. {', '.join(missing)}): was it written by "
                              "another model or mode?")
    for key, variable in named:
        value = arrays[key]
        if tuple(value.shape) != tuple(variable.shape):
            raise CheckpointError(f"checkpoint part {part!r}: {key} has shape {value.shape}, "
                                  f"the model's {tuple(variable.shape)}")
        variable.assign(value)


class LockstepCheckpoints:
    """The checkpoints one lockstep ``fit`` writes to and resumes from in ``directory``.

    ``trainer`` provides ``rank``, ``barrier()``, ``share_text(text)`` (rank 0's text on
    every rank), ``checkpoint_parts()`` (part name -> {key: array} this rank writes) and
    ``restore_parts(load)`` (reads its parts with ``load(part)`` and broadcasts them).
    """

    def __init__(self, trainer, directory: str | os.PathLike, every: int | None,
                 fingerprint: dict):
        from ralp.errors import InvalidArgumentError

        if every is not None and (not isinstance(every, int) or every < 1):
            raise InvalidArgumentError(f"checkpoint_every must be a positive number of steps, "
                                       f"got {every!r}")
        self.trainer, self.every, self.fingerprint = trainer, every, fingerprint
        self._pending: TrainingState | None = None  # saved, to commit once its copies landed
        self._copies: Callable[[], None] | None = None  # waits for this rank's copy
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CheckpointError(f"cannot use checkpoint_dir {str(directory)!r}: {e}") from None

    def due(self, done: int) -> bool:
        return bool(self.every) and done % self.every == 0

    # ------------------------------------------------------------------ saving

    def save(self, state: TrainingState) -> None:
        """Write this rank's parts of checkpoint ``state.total_steps``; rank 0 then commits it
        with the state file once every rank has written (a collective: call it on every
        rank). A trainer that sends copies in the background (Stanza's FC ranks to their
        peers: ``start_copies``) has them sent while the next step computes; the commit then
        waits for :meth:`finish`, after that step."""
        self.finish()
        number = state.total_steps
        for part, arrays in self.trainer.checkpoint_parts().items():
            self._write_part(number, part, arrays)
        start_copies = getattr(self.trainer, "start_copies", None)
        if start_copies is None:
            self._commit(state)
            return
        self._copies = start_copies(lambda part, arrays: self._write_part(number, part, arrays))
        self._pending = state

    @property
    def pending(self) -> bool:
        """A checkpoint is saved but not committed (its copies may be crossing)."""
        return self._pending is not None

    def finish(self) -> None:
        """Commit the checkpoint whose copies were in flight, once they have landed (a
        collective when one is pending, which is so on every rank at once)."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        if self._copies is not None:
            self._copies()  # waits for this rank's copy; raises its error
        self._commit(pending)

    def _commit(self, state: TrainingState) -> None:
        self.trainer.barrier()  # every rank's parts are written
        if self.trainer.rank == 0:
            path = self.directory / f"ckpt-{state.total_steps}.ralp.json"
            tmp = path.with_suffix(".json.tmp")
            tmp.write_text(state.to_json())
            tmp.replace(path)
            self._prune(self.directory.glob("ckpt-*.ralp.json"))

    def _write_part(self, number: int, part: str, arrays: dict) -> None:
        path = self.directory / f"ckpt-{number}.{part}.npz"
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
        tmp.replace(path)
        self._prune(self.directory.glob(f"ckpt-*.{part}.npz"))

    def _prune(self, files) -> None:
        """Keep the newest KEEP checkpoints' files of one kind."""
        files = sorted(files, key=lambda p: int(p.name.split(".")[0].split("-")[1]))
        for old in files[:-KEEP]:
            old.unlink(missing_ok=True)

    # ------------------------------------------------------------------ restoring

    def restore(self) -> TrainingState | None:
        """The newest complete checkpoint's state, its parts read and broadcast, on every rank;
        None when the directory has none (a collective: call it on every rank).

        Raises:
            CheckpointError: the checkpoint is another model's or mode's, or unreadable.
        """
        text = self._latest_text() if self.trainer.rank == 0 else None
        shared = json.loads(self.trainer.share_text(json.dumps(text)))
        if shared is None:
            return None
        if "error" in shared:
            raise CheckpointError(shared["error"])
        state = TrainingState.from_json(shared["state"])
        number = state.total_steps
        self.trainer.restore_parts(lambda part: self._read_part(number, part))
        return state

    def _latest_text(self) -> dict | None:
        """Rank 0: the newest state file's text, or an error to share, or None."""
        numbers = sorted(int(m.group(1)) for p in self.directory.iterdir()
                         if (m := STATE.match(p.name)))
        if not numbers:
            return None
        path = self.directory / f"ckpt-{numbers[-1]}.ralp.json"
        try:
            state = TrainingState.from_json(path.read_text())
        except CheckpointError as e:
            return {"error": str(e)}
        except (ValueError, KeyError, TypeError) as e:
            return {"error": f"{path} is not a ralp checkpoint state ({e}); use another "
                             "checkpoint_dir"}
        if state.fingerprint != self.fingerprint:
            return {"error": f"the checkpoint in {str(self.directory)!r} is of "
                             f"{describe_mismatch(state.fingerprint, self.fingerprint)}; use "
                             "another checkpoint_dir"}
        return {"state": state.to_json()}

    def _read_part(self, number: int, part: str) -> dict:
        path = self.directory / f"ckpt-{number}.{part}.npz"
        try:
            with np.load(path) as data:
                return {key: data[key] for key in data.files}
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint {number} has no part {part!r} in "
                                  f"{str(self.directory)!r} (this rank's file {path.name})") from None
        except (OSError, ValueError) as e:
            raise CheckpointError(f"cannot read {path}: {e}") from None
