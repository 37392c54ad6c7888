"""Failure bookkeeping of fit: one record per lost task, however many reconnects it took."""

from ralp.training.checkpoints import Failure, Recoveries
from ralp.training.history import History


def _lost_ps(at_step: int, restored: int, recovery_s: float, message: str) -> Failure:
    return Failure(task="ps:0", kind="ps", at_step=at_step, detected_at=0.0,
                   restored_step=restored, steps_redone=at_step - restored,
                   recovery_s=recovery_s, message=message)


def test_a_failure_while_recovering_from_the_same_task_is_one_failure_with_two_reconnects():
    history = History()
    recoveries = Recoveries(history)
    recoveries.record(_lost_ps(27, 20, 1.5, "lost"), clock=0.0)
    recoveries.note_time_lost(23)  # redoing: not back at step 27 yet
    recoveries.record(_lost_ps(23, 20, 0.25, "connection refused"), clock=5.0)
    [failure] = history.failures
    assert (failure.at_step, failure.restored_step, failure.reconnects) == (27, 20, 2)
    assert failure.steps_redone == 7 + 3 and failure.recovery_s == 1.75
    assert "connection refused" in failure.message and failure.time_lost_s is None
    recoveries.note_time_lost(27)
    assert failure.time_lost_s is not None and failure.time_lost_s > 0


def test_a_loss_after_training_got_past_the_last_one_is_a_new_failure():
    history = History()
    recoveries = Recoveries(history)
    recoveries.record(_lost_ps(27, 20, 1.5, "lost"), clock=0.0)
    recoveries.note_time_lost(27)
    recoveries.record(_lost_ps(45, 40, 1.0, "lost again"), clock=9.0)
    worker = Failure(task="worker:1", kind="worker", at_step=46, detected_at=0.0)
    recoveries.record(worker, clock=9.5)  # another task, while the PS is being recovered from
    assert [f.at_step for f in history.failures] == [27, 45, 46]
    assert [f.reconnects for f in history.failures] == [1, 1, 1]
