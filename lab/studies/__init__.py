"""The lab's studies: experiments beside the benchmark, each a command of its own, run from
the repository root:

- ``python -m lab.studies.sync_digits``: BSP, ASP, SSP and DSSP on real data, accuracy over time;
- ``python -m lab.studies.stanza_accuracy``: Stanza's accuracy experiment against plain PS;
- ``python -m lab.studies.chaos``: training through killed tasks.

:mod:`lab.studies.digits_data` holds what they share; :mod:`lab.studies.result_schemas` their
results' schemas. They use ralp as a user would and from within (its runtimes, clusters and
bench launcher); ralp never imports them.
"""
