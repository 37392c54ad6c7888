"""The planner (``python -m ralp.planner``): predict every mode's throughput, choose, validate.

The core, for a real cluster (nodes of several devices that share a NIC):

- :mod:`ralp.planner.topology`: one step formula per mode family (PS and RALP, rings,
  Stanza) from the byte model's bytes, one device's compute and the topology.
- :mod:`ralp.planner.cluster_plan`: each mode's layout on the nodes, its prediction, and the
  decision, ties inside the error band going to the mode that needs least.
- :mod:`ralp.planner.cluster_report`: the answer, the table, JSON, CSV, plot and ``--save``.

Calibration (:mod:`ralp.planner.calibration`) measures a device's compute into a versioned
JSON. The simulated cluster (every task on this host's cores, or on budgeted devices) has
models of its own, validated against the bench's recorded runs:
:mod:`ralp.planner.model`, :mod:`ralp.planner.ring_step`, :mod:`ralp.planner.stanza_step`,
:mod:`ralp.planner.validate` and :mod:`ralp.planner.recommend`.
"""
