"""The planner (``python -m ralp.planner``): predict every mode's throughput and choose.

The core, for a real cluster (nodes of several devices that share a NIC):

- :mod:`ralp.planner.topology`: one step formula per mode family (PS and RALP, rings,
  Stanza) from the byte model's bytes, one device's compute and the topology.
- :mod:`ralp.planner.cluster_plan`: each mode's layout on the nodes, its prediction, and the
  decision, ties inside the error band going to the mode that needs least.
- :mod:`ralp.planner.cluster_report`: the answer, the table, JSON, CSV, plot and ``--save``.

Its inputs (:mod:`ralp.planner.terms`): one device's compute, from a calibration
(:mod:`ralp.planner.calibration`, measured here or on the user's own device), from the user's
measured throughput, or estimated from the model's FLOPs (:mod:`ralp.planner.estimate`); and
the byte model's bytes (:mod:`ralp.planner.workload`). Every decision ralp makes (``python -m
ralp.planner``, ``ralp.wrap``'s mode "auto", the bench's ``--modes auto``) comes from the core.

The simulated cluster's own step models (:mod:`lab.planner.ps_step`,
:mod:`lab.planner.ring_step`, :mod:`lab.planner.stanza_step`, :mod:`lab.planner.predict`)
and the probes they read serve the lab, which validates them against the bench's recorded
runs (``python -m lab.planner --validate``).
"""
