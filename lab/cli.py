"""``python -m lab list`` and ``python -m lab run NAME [--dry-run]``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lab.registry import Lab, UnknownExperiment, experiment, experiments, relative
from lab.runner import StepFailed, dry_run, results_dir, run


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lab", description=(
        "ralp's lab: the experiments behind the results page (benchmarks/README.md)."))
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="every experiment, with what it needs")
    run_it = commands.add_parser("run", help="run one experiment into lab/results/NAME/")
    run_it.add_argument("name", help="an experiment's name (python -m lab list)")
    run_it.add_argument("--dry-run", action="store_true",
                        help="print the commands, run nothing")
    run_it.add_argument("--python", default=sys.executable,
                        help="the Python that runs ralp (default: this one)")
    run_it.add_argument("--out", type=Path, default=None,
                        help="results folder (default: lab/results/NAME)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "list":
        for name, found in experiments().items():
            needs = f"  [needs {', '.join(found.needs)}]" if found.needs else ""
            print(f"{name:34} {found.summary}{needs}")
        return 0
    try:
        chosen = experiment(args.name)
    except UnknownExperiment:
        print(f"python -m lab: no experiment {args.name!r}; `python -m lab list` shows them",
              file=sys.stderr)
        return 2
    lab = Lab(python=relative(args.python), out=args.out or results_dir(chosen.name))
    if args.dry_run:
        print("\n".join(dry_run(chosen, lab)))
        return 0
    try:
        failed = run(chosen, lab)
    except StepFailed as failure:
        print(f"python -m lab: {failure}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("python -m lab: interrupted", file=sys.stderr)
        return 130
    print(f"[lab] {chosen.name}: results in {lab.out}"
          + (f" ({failed} command(s) failed)" if failed else ""))
    return 0
