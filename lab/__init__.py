"""ralp's lab: the experiments behind the results page, kept apart from the package users install.

``python -m lab list`` shows every experiment; ``python -m lab run NAME`` runs one and writes
its files, with the commands that made them and the environment they ran in, to
``lab/results/NAME/``. Each experiment is a module of :mod:`lab.experiments`
(see :mod:`lab.registry` for what such a module defines).

The lab imports ralp; ralp never imports the lab.
"""
