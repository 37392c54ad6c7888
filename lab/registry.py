"""The lab's registry: every module of :mod:`lab.experiments` is one experiment.

An experiment module defines

- ``SUMMARY``: one line, what the experiment measures;
- ``NEEDS``: what it needs to run (for example ``("root", "horovod")``), shown by ``list``;
- ``steps(lab: Lab) -> list[Step]``: the commands it runs, in order;
- optionally ``SETTINGS``: ``{name: one line}``, the variants its steps cover (a link rate, a
  device count). ``steps`` then makes one setting's commands, ``lab.setting``'s; a run without
  ``--setting`` runs every setting in turn.

An experiment whose ``NEEDS`` holds ``"retired"`` keeps its results but no commands: its
script is gone (an investigation that led nowhere, a one-off probe, a setting the code no
longer has) and ``lab/results/NAME/README.md`` says what was asked and what was found.

A :class:`Step` is one command (an argv list); its standard output goes to a file of the
experiment's results when ``stdout`` names one (``lab.path(NAME)``: relative to the
repository's root, as the command's own paths are; appended to with ``append``). The
experiment's name is its module's name with ``_`` written as ``-``. Results go to
``lab/results/NAME/``, with ``commands.txt`` (what ran, in order, with each exit status) and
``environment.json`` (versions, host, commit).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType

LAB_DIR = Path(__file__).resolve().parent
ROOT = LAB_DIR.parent
RESULTS_DIR = LAB_DIR / "results"
RETIRED = "retired"


@dataclass(frozen=True)
class Step:
    """One command of an experiment.

    ``argv``: the command; ``stdout``: the file of the experiment's results that takes its
    standard output, as ``Lab.path`` names it (None: the terminal); ``may_fail``: a non-zero
    exit does not stop the experiment (a bench whose some settings fail still writes the
    others); ``append``: the
    standard output is added to ``stdout``'s file, not written over it (several commands'
    output in one file)."""

    argv: tuple[str, ...]
    stdout: str | None = None
    may_fail: bool = False
    append: bool = False

    def line(self) -> str:
        text = shlex.join(self.argv)
        if not self.stdout:
            return text
        return f"{text} {'>>' if self.append else '>'} {self.stdout}"


@dataclass(frozen=True)
class Lab:
    """What an experiment's ``steps`` may use: the Python to run (``python``), the
    experiment's results folder (``out``), the lab's results root (``results``), whose
    other experiments' files an experiment may read, and the setting whose commands
    ``steps`` makes (None for an experiment without ``SETTINGS``)."""

    python: str
    out: Path
    results: Path = RESULTS_DIR
    setting: str | None = None

    def path(self, name: str) -> str:
        """A file of this experiment's results, as a command line names it (relative to the
        repository's root, where every command runs)."""
        return relative(self.out / name)

    def of(self, experiment: str, name: str) -> str:
        """A file of another experiment's results."""
        return relative(self.results / experiment / name)


def relative(path: Path | str) -> str:
    """``path`` relative to the repository's root where it lies inside it, so that the
    commands a result records name no machine's paths."""
    resolved = Path(os.path.abspath(path))
    try:
        return str(resolved.relative_to(ROOT))
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class Experiment:
    """One registered experiment: its name, its module and what that module says."""

    name: str
    module: ModuleType
    summary: str
    needs: tuple[str, ...] = field(default=())

    @property
    def settings(self) -> dict[str, str]:
        return dict(getattr(self.module, "SETTINGS", {}))

    @property
    def retired(self) -> bool:
        return RETIRED in self.needs

    def plan(self, lab: Lab) -> list[tuple[str | None, list[Step]]]:
        """The steps of ``lab.setting``, or of every setting in turn where it is None."""
        if not self.settings or lab.setting is not None:
            return [(lab.setting, list(self.module.steps(lab)))]
        return [(name, list(self.module.steps(replace(lab, setting=name))))
                for name in self.settings]

    def steps(self, lab: Lab) -> list[Step]:
        return [step for _, steps in self.plan(lab) for step in steps]


class UnknownExperiment(KeyError):
    """A name that no module of :mod:`lab.experiments` defines."""


def experiments() -> dict[str, Experiment]:
    """Every experiment, by name, in name order."""
    import lab.experiments as package

    found: dict[str, Experiment] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        name = info.name.replace("_", "-")
        found[name] = Experiment(name, module, module.SUMMARY.strip(),
                                 tuple(getattr(module, "NEEDS", ())))
    return found


def experiment(name: str) -> Experiment:
    """The experiment called ``name``; raises :class:`UnknownExperiment`."""
    known = experiments()
    if name not in known:
        raise UnknownExperiment(name)
    return known[name]
