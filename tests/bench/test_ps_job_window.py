"""A PS-mode run's measured window inside one epoch: between the warm-up and one more step per
worker, the CPU counters read at its edges and the link counters at the epoch's (a scripted
trainer stands in for the cluster; the real window is run by tests/bench/test_bench_run.py)."""

from dataclasses import dataclass, field

import pytest

from ralp.bench.ps_job import SetupClock, _window_after_warmup
from ralp.bench.runspec import RunSpec
from ralp.profiler.links import LinkBytes


@dataclass
class _History:
    step_end_times: list = field(default_factory=list)
    step_losses: list = field(default_factory=list)
    sync: list = field(default_factory=list)


class _ScriptedTrainer:
    """fit() 'runs' steps ending at 1, 2, 3, ... s, calling the callbacks as the bench's
    trainer does, and counts the bytes and CPU its tasks would have used by then."""

    def __init__(self):
        self.now, self.fits = 0.0, []

    def fit(self, dataset_fn, steps_per_epoch, verbose, callbacks=()):
        self.fits.append(steps_per_epoch)
        history = _History()
        for step in range(steps_per_epoch):
            self.now = float(step + 1)
            history.step_end_times.append(self.now)
            history.step_losses.append(1.0 / (step + 1))
            for callback in callbacks:
                callback.on_train_batch_end(step, {"loss": history.step_losses[-1]})
        return history


def test_the_window_runs_from_the_warmups_end_to_the_last_measured_step():
    run = RunSpec("lenet", "ps", 4, 2, 2, steps=3, warmup=2)  # 4 warm-up, 6 measured, 2 after
    trainer = _ScriptedTrainer()
    links = lambda: {"worker:0": LinkBytes(int(trainer.now * 100), int(trainer.now * 10))}  # noqa: E731
    cpu = lambda: ("cpu at", trainer.now)  # noqa: E731
    window = _window_after_warmup(trainer, None, run, links, cpu, SetupClock())
    assert trainer.fits == [4 + 6 + 2]  # one epoch
    assert window.start == 4.0 and window.wall == 10.0 - 4.0
    assert window.history.step_end_times == [5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert (window.cpu_before, window.cpu_after) == (("cpu at", 4.0), ("cpu at", 10.0))
    # the link counters span the whole epoch, all 12 steps
    assert window.links_before["worker:0"] == LinkBytes(0, 0)
    assert window.links_after["worker:0"] == LinkBytes(1200, 120)
    assert window.link_steps == 12


def test_the_window_reports_its_measured_steps(monkeypatch):
    import ralp.cluster.fresh_process as fresh

    sent = []
    monkeypatch.setattr(fresh, "report_progress", sent.append)
    run = RunSpec("lenet", "ps", 4, 2, 2, steps=5, warmup=1)  # 2 warm-up, 10 measured
    _window_after_warmup(_ScriptedTrainer(), None, run, None, None, SetupClock())
    assert sent == [("phase", "measuring"), ("step", 5), ("step", 10)]


@pytest.mark.parametrize("warmup", [0, 1])
def test_every_worker_warms_up_at_least_once(warmup):
    run = RunSpec("lenet", "ps", 3, 2, 1, steps=2, warmup=warmup)
    trainer = _ScriptedTrainer()
    window = _window_after_warmup(trainer, None, run, None, None, SetupClock())
    assert trainer.fits == [2 + 4 + 2]
    assert window.start == 2.0 and len(window.history.step_end_times) == 4
