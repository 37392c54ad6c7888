"""``ralp.wrap``'s trainer of mode "collective" (``ralp.modes.WRAP_MODES`` names it): the
runtime made on every worker of the job, the one trainer around it."""

from __future__ import annotations

from ralp.training.trainer import Trainer


def collective_trainer(model, optimizer, loss, metrics, *, batch_size, plan, step_timeout,
                       fc_workers) -> Trainer:
    """TensorFlow's own collectives; a collective slower than ``step_timeout`` fails."""
    from ralp.collective.runtime import CollectiveRuntime

    runtime = CollectiveRuntime.from_model(model, optimizer, loss, metrics,
                                           timeout_s=step_timeout)
    return Trainer(runtime, runtime.setup, runtime.original, batch_size=batch_size)
