"""The planner (``python -m ralp.planner``): predict every mode's throughput, choose, validate.

Data flows calibration -> per-mode model -> recommendation / validation:

- :mod:`ralp.planner.calibration`: measured compute times of a model's head and tail on this
  host (one process, a few steps) and the host's contention facts, as JSON.
- :mod:`ralp.planner.model`: one small pure function per mode (ps, ralp-h, ralp-n, horovod)
  from the calibration, the byte model (:func:`ralp.profiler.bytes_model.mode_traffic`), the
  cluster shape and the bandwidth.
- :mod:`ralp.planner.validate`: predictions against recorded bench runs.
- :mod:`ralp.planner.recommend`: every mode's prediction, the best one, the skewness verdict.
"""
