"""The simulated cluster's network and devices, on one machine.

- :mod:`ralp.emulation.fabric`: one network namespace per host on a bridge, every link shaped
  with ``tc`` (:mod:`ralp.emulation.iproute` runs ``ip``/``tc``; :mod:`ralp.emulation.counters`
  reads what each link carried).
- :mod:`ralp.emulation.devices`: one control group per device with a CPU bandwidth limit, so a
  simulated device computes with a budget of its own, as a real one would
  (:mod:`ralp.emulation.budget` chooses that budget).

Starting the tasks that live on them is :mod:`ralp.cluster`'s job.
"""
