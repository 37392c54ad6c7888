"""The planner's inputs, shared by every step formula: one device's compute (:class:`Compute`),
and a mode's bytes on each link (:class:`Links`).

Units: seconds, bytes. A *step* is one batch on every worker, as in the byte model
(:mod:`ralp.profiler.bytes_model`).
"""

from __future__ import annotations

from dataclasses import dataclass

BACKWARD_RATIO = 2.0  # backward FLOPs over forward FLOPs
# The share of a backward pass that transfers started as its gradients come out run beside:
# the first gradients (the output layers', a small part of a CNN's backward FLOPs) are ready
# almost as the backward pass starts, and their bytes go on the wire a little later. Measured
# on the simulated cluster from the allreduce modes' step timelines, the first gradient's
# bytes on the wire against the backward pass (docs/explanation/cost-model.md, "Overlap").
OVERLAP_SHARE = 0.861


def forward_backward_s(step_s: float) -> tuple[float, float]:
    """A training step's compute split into its forward and backward passes, the backward
    costing :data:`BACKWARD_RATIO` times the forward."""
    return step_s / (1 + BACKWARD_RATIO), step_s * BACKWARD_RATIO / (1 + BACKWARD_RATIO)


def behind_backward_s(backward_s: float, transfer_s: float,
                      share: float = OVERLAP_SHARE) -> float:
    """A backward pass with the transfers of its gradients (PS pushes, ring reductions)
    started as the gradients come out: they run beside its last ``share``, so the phase
    lasts the backward pass, or its part before that share plus the transfers, the longer.
    One rule for every mode family (docs/explanation/cost-model.md, "Overlap")."""
    return max(backward_s, (1.0 - share) * backward_s + transfer_s)


@dataclass(frozen=True)
class Compute:
    full_s: float  # forward + backward + update of the whole model, one worker batch
    tail_s: float  # the same for the tail (offloaded layers, loss included)
    # the tail on ``stacked`` worker batches at once (Stanza's FC rank stacks its group's):
    # fully connected layers read their weights once per call, whatever the rows, so at small
    # batches the time grows far slower than the rows. None: assumed linear in the batch.
    tail_stacked_s: float | None = None
    stacked: int = 1
    # the head's step measured on its own; None: the whole model's less the tail's. The
    # difference is a poor stand-in where the tail is most of the step, as the noise of both
    # measurements lands on it.
    head_measured_s: float | None = None

    @property
    def head_s(self) -> float:
        if self.head_measured_s is not None:
            return self.head_measured_s
        return max(0.0, self.full_s - self.tail_s)

    def scaled(self, factor: float) -> Compute:
        """Every time multiplied by ``factor``: the same steps on a device ``1 / factor``
        times as fast."""
        def times(seconds: float | None) -> float | None:
            return None if seconds is None else seconds * factor

        return Compute(self.full_s * factor, self.tail_s * factor, times(self.tail_stacked_s),
                       self.stacked, times(self.head_measured_s))

    def tail_group_s(self, group: int) -> float:
        """The tail on ``group`` worker batches stacked: the line through the two measured
        batches (one, and ``stacked``), else ``group`` x ``tail_s``."""
        if self.tail_stacked_s is None or self.stacked < 2:
            return group * self.tail_s
        per_batch = max(0.0, self.tail_stacked_s - self.tail_s) / (self.stacked - 1)
        return self.tail_s + (group - 1) * per_batch


@dataclass(frozen=True)
class Links:
    ps_tx: tuple[int, ...]  # bytes per step each PS task sends (pulls, boundary gradients)
    ps_rx: tuple[int, ...]  # bytes per step each PS task receives (pushes, activations)
    worker_tx: int  # bytes per worker batch a worker sends (all workers are alike)
    total: int  # bytes per step crossing any link
    messages: int  # transfers per worker batch (variables pulled + pushed, tensors crossing)
    # stanza only: (head ring bytes each CONV rank sends, tail ring bytes each FC rank sends)
    rings: tuple[int, int] = (0, 0)
