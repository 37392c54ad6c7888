"""Experiments beside the benchmark, each a command of its own:

- ``python -m ralp.experiments.sync``: BSP, ASP, SSP and DSSP on real data, accuracy over time;
- ``python -m ralp.experiments.stanza``: Stanza's accuracy experiment against plain PS;
- ``python -m ralp.experiments.chaos``: training through killed tasks.

:mod:`ralp.experiments.digits` holds what they share; :mod:`ralp.experiments.results` their
results' schemas.
"""
