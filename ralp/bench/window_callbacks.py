"""The bench's Keras callbacks inside a PS run's fit: progress to the parent, and the edges of
the measured window (:mod:`ralp.bench.ps_job`)."""

from __future__ import annotations

from collections.abc import Callable

import keras

from ralp.bench.measure import PROGRESS_EVERY


class ProgressCallback(keras.callbacks.Callback):
    """Sends the number of measured steps done to the parent every few steps."""

    def __init__(self, send: Callable[[object], None]):
        super().__init__()
        self.send = send

    def on_train_batch_end(self, batch: int, logs=None) -> None:
        if (batch + 1) % PROGRESS_EVERY == 0:
            self.send(("step", batch + 1))


class WindowEdges(ProgressCallback):
    """Marks the measured window inside the epoch: reads the CPU and link counters when the
    last warm-up step and the last measured step are seen finished (the window the step
    time spans), and reports measured steps."""

    def __init__(self, first: int, last: int, read_cpu, clock,
                 send: Callable[[object], None], read_links=None):
        super().__init__(send)
        self.first, self.last, self.read_cpu, self.clock = first, last, read_cpu, clock
        self.read_links = read_links
        self.cpu: list = [None, None]
        self.links: list = [None, None]

    def on_train_batch_end(self, batch: int, logs=None) -> None:
        done = batch + 1
        if done in (self.first, self.last):
            edge = done == self.last
            self.links[edge] = dict(self.read_links()) if self.read_links else None
            self.cpu[edge] = self.read_cpu() if self.read_cpu else None
        if done == self.first:
            self.clock.lap("warmup")
            self.send(("phase", "measuring"))
        elif self.first < done <= self.last and (done - self.first) % PROGRESS_EVERY == 0:
            self.send(("step", done - self.first))
