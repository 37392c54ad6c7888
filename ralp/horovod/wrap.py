"""``ralp.wrap``'s trainers of the Horovod modes (``ralp.modes.WRAP_MODES`` names them): the
user's compiled set-up read once, the runtime made on every rank, the one trainer around it."""

from __future__ import annotations

from ralp.defaults import DEFAULT_BATCH_SIZE
from ralp.training.compile import optimizer_factory, training_setup
from ralp.training.optimizer_state import read_compiled
from ralp.training.trainer import Trainer


def _compiled(model, optimizer, loss, metrics):
    """The user's set-up, a factory of its optimizer and its optimizer's state, read once."""
    setup = training_setup(model, optimizer, loss, metrics, where="ralp.wrap")
    return setup, optimizer_factory(setup.optimizer), read_compiled(setup.optimizer, model)


def horovod_trainer(model, optimizer, loss, metrics, *, batch_size, plan, step_timeout,
                    fc_workers) -> Trainer:
    """Mode "horovod": every rank a full replica, gradients allreduced."""
    setup, make_optimizer, optimizer_state = _compiled(model, optimizer, loss, metrics)
    from ralp.horovod.runtime import HorovodRuntime

    runtime = HorovodRuntime(model, make_optimizer, optimizer_state=optimizer_state)
    return Trainer(runtime, setup, model, batch_size=batch_size)


def stanza_trainer(model, optimizer, loss, metrics, *, batch_size, plan, step_timeout,
                   fc_workers) -> Trainer:
    """Mode "stanza": CONV ranks allreduce the head, ``fc_workers`` FC ranks hold the tail."""
    setup, make_optimizer, optimizer_state = _compiled(model, optimizer, loss, metrics)
    from ralp.horovod.stanza import StanzaRuntime

    runtime = StanzaRuntime(model, make_optimizer, fc_workers=fc_workers, plan=plan,
                            batch_size=batch_size or DEFAULT_BATCH_SIZE,
                            optimizer_state=optimizer_state)
    return Trainer(runtime, setup, model, batch_size=batch_size)
