"""``python -m ralp.planner``: predict every mode's throughput for a model on a cluster and
choose, with the planner's core (:mod:`ralp.planner.cluster_report`); or measure a model's
compute on this host into a calibration (``--calibrate``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from functools import cache

from ralp._cli import (
    finite_float,
    positive_float,
    positive_int,
)
from ralp.defaults import DEFAULT_BATCH_SIZE, DEFAULT_THRESHOLD
from ralp.planner.command import run_command
from ralp.planner.modes import MODES

PROG = "python -m ralp.planner"
FORMATS = ("table", "json")


def parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Predict the throughput of every mode (ps, ralp-h, ralp-n, horovod, "
        "stanza, collective) for a model on a cluster and pick the best.",
    )
    p.add_argument("--calibrate", action="store_true",
                   help="measure the model's compute times on this host into --output")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", help="a model of the zoo")
    src.add_argument("--keras-model", metavar="PATH", help="a saved .keras model file")
    p.add_argument("--batch-size", type=positive_int, help="per-worker batch (default: the "
                   f"model's benchmark default; {DEFAULT_BATCH_SIZE} for --keras-model)")
    p.add_argument("--image-size", type=positive_int, help="zoo model input side")
    p.add_argument("--num-classes", type=positive_int, default=1000)
    p.add_argument("--devices", type=positive_int, nargs="+", default=[4],
                   help="devices N (several: an extrapolation)")
    p.add_argument("--bandwidth", nargs="+", default=["1gbit"],
                   help="every link's rate, tc style (several: one curve each)")
    p.add_argument("--compute-profile", metavar="FILE",
                   help="a calibration JSON (from --calibrate, here or on another host)")
    p.add_argument("--output", metavar="FILE", help="--calibrate: the calibration JSON to "
                   "write (entries of an existing file are kept)")
    p.add_argument("--steps", type=positive_int, default=None, help="--calibrate: timed steps")
    real = p.add_argument_group("a real cluster (docs/how-to/plan-your-cluster.md)")
    real.add_argument("--nodes", type=positive_int, nargs="+", metavar="K",
                      help="plan nodes of several GPUs: K nodes (several: one row each); "
                      "--bandwidth is then each node's NIC")
    real.add_argument("--gpus-per-node", type=positive_int, default=1, metavar="G")
    real.add_argument("--intra-node-bandwidth", metavar="RATE", help="each GPU's link "
                      "inside its node (default: PCIe 3.0 x16, 126gbit)")
    real.add_argument("--device-throughput", type=positive_float, metavar="IMAGES_PER_S",
                      help="one GPU's training throughput at this batch, as you measured it")
    real.add_argument("--modes", nargs="+", choices=MODES, help="the candidate modes")
    real.add_argument("--sync", choices=("async", "bsp"), default="async",
                      help="the PS modes' synchronization")
    real.add_argument("--horovod-build", choices=("installed", "nccl", "gloo", "none"),
                      default="installed", help="the cluster's Horovod: its GPU operations "
                      "(gloo: gradients through host memory), or none")
    real.add_argument("--save", metavar="DIR", help="write the chosen configuration "
                      "(ralp_plan.json) and the commands that run it (cmd_optimal.txt)")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--plot", metavar="PNG", help="draw the prediction (and write its CSV "
                   "beside: same name, .csv)")
    p.add_argument("--csv", metavar="CSV", help="write every prediction as CSV here")
    p.add_argument("--threshold", type=finite_float, default=DEFAULT_THRESHOLD,
                   help="the skewness rule's K, shown beside the planner's choice")
    return p


@cache
def zoo_workload(model: str, batch_size: int, image_size: int, num_classes: int):
    from ralp.models import build_model
    from ralp.planner.workload import Workload
    from ralp.profiler.api import profile

    return Workload(profile(build_model(model, num_classes, image_size), batch_size))


def _calibrate(args) -> str:
    from ralp.planner.calibrate_cli import calibrate

    return calibrate(args)


def answer(args) -> str:
    """What the user's command does with ``args``: a calibration, or a plan from the core."""
    if args.calibrate:
        return _calibrate(args)
    if args.nodes:
        from ralp.planner.recommend import cluster_cli

        return cluster_cli(args, zoo_workload)
    from ralp.planner.recommend import recommend_cli

    return recommend_cli(args, zoo_workload)


def run(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """The command's work; ``prog``: the name it was run by."""
    return run_command(argv, prog, parser=parser, work=answer)


def main(prog: str = PROG) -> None:
    sys.exit(run(prog=prog))
