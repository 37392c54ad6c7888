"""``python -m lab list`` and ``python -m lab run NAME [--setting S] [--dry-run]``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lab.registry import (
    RETIRED,
    Lab,
    UnknownExperiment,
    experiment,
    experiments,
    relative,
)
from lab.runner import StepFailed, dry_run, results_dir, retired_readme, run


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lab", description=(
        "ralp's lab: the experiments behind the results page (benchmarks/README.md)."))
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="every experiment, with what it needs")
    run_it = commands.add_parser("run", help="run one experiment into lab/results/NAME/")
    run_it.add_argument("name", help="an experiment's name (python -m lab list)")
    run_it.add_argument("--setting", help="one of the experiment's settings (default: all)")
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
            needs = [need for need in found.needs if need != RETIRED]
            tag = "  [retired]" if found.retired else ""
            tag += f"  [needs {', '.join(needs)}]" if needs else ""
            print(f"{name:24} {found.summary}{tag}")
            if found.settings:
                print(f"{'':24}   settings: {', '.join(found.settings)}")
        return 0
    try:
        chosen = experiment(args.name)
    except UnknownExperiment:
        return _refuse(f"no experiment {args.name!r}; `python -m lab list` shows them")
    if args.setting is not None and args.setting not in chosen.settings:
        known = ", ".join(chosen.settings) or "none"
        return _refuse(f"{chosen.name} has no setting {args.setting!r} (its settings: {known})")
    lab = Lab(python=relative(args.python), out=args.out or results_dir(chosen.name),
              setting=args.setting)
    if chosen.retired and not args.dry_run:
        return _refuse(f"{chosen.name} is retired: see {retired_readme(chosen.name)}")
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


def _refuse(message: str) -> int:
    print(f"python -m lab: {message}", file=sys.stderr)
    return 2
