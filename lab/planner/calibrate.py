"""``python -m lab.planner.calibrate``: a calibration of the simulated cluster, with the
probes the lab's step models read. The bench's ``--calibrate`` runs it before each round where
``RALP_BENCH_CALIBRATION=lab.planner.calibrate:bench_command`` (:func:`bench_command`).

- ``--shared-host``: every task on this host's cores: the host's capacity for concurrent
  steps and Stanza's phases under Horovod, besides the compute;
- ``--device-cpus CPUS --devices N``: one budgeted device of N: the compute inside its
  budget, the CPU cost of a gRPC transfer and of a ring's byte, each ring's overlap of wire
  and CPU (at ``--overlap-ratios``, or lent by ``--overlap-from``), and gRPC's CPU per byte on
  the fabric at ``--transfer-rates``.

A user's calibration of their own device (compute only) is ``python -m ralp.planner
--calibrate``; ``python -m ralp.planner.calibrate_cli`` is the bench's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ralp._cli import (
    UsageError,
    positive_float,
)

PROG = "python -m lab.planner.calibrate"


def parser(p: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The product's calibration options and the probes' (added to ``p`` where given)."""
    from ralp.planner.calibrate_cli import parser as device_parser

    p = device_parser(p or argparse.ArgumentParser(
        prog=PROG, description="Calibrate the simulated cluster: a model's compute and the "
        "probes of its links."))
    p.add_argument("--shared-host", action="store_true",
                   help="every task shares this host's cores")
    p.add_argument("--overlap-from", metavar="FILE", nargs="+",
                   help="a calibration of the same budget whose rings' overlaps serve")
    p.add_argument("--overlap-ratios", type=positive_float, nargs="+", metavar="R",
                   help="the wire/CPU ratios to measure each ring's overlap at (default 1)")
    p.add_argument("--transfer-rates", nargs="+", metavar="RATE", default=(),
                   help="measure gRPC's CPU per byte on the simulated fabric at these rates")
    return p


def calibrate(args) -> str:
    """The calibration ``args`` ask for, written to ``--output``; returns its summary."""
    import os

    from lab.planner.host_calibration import HostCalibration
    from lab.planner.probes import calibrate_host, calibrate_zoo_host
    from ralp.defaults import DEFAULT_BATCH_SIZE
    from ralp.models import get_model_spec
    from ralp.planner.calibration import DEFAULT_CALIBRATION_STEPS

    if not args.output:
        raise UsageError("--calibrate needs --output FILE (the calibration JSON to write)")
    steps = args.steps or DEFAULT_CALIBRATION_STEPS
    if args.device_cpus is not None and args.shared_host:
        raise UsageError("--device-cpus measures one budgeted device; --shared-host a host "
                         "whose tasks share its CPUs: give one of them")
    on_device = {"device_cpus": args.device_cpus, "devices": args.devices[0]}
    overlaps = _lent_overlaps(args)
    if args.model is not None:
        spec = get_model_spec(args.model)
        batch = args.batch_size or spec.default_batch_size
        image = args.image_size or spec.default_image_size
        new = calibrate_zoo_host(args.model, batch, image, args.num_classes,
                            shared_host=args.shared_host, steps=steps, overlaps=overlaps,
                            overlap_ratios=tuple(args.overlap_ratios) if args.overlap_ratios
                            else None, transfer_rates=_transfer_rates(args),
                            **on_device)
        name = args.model
    elif args.keras_model is not None:
        from ralp.profiler.cli import load_keras_model

        model = load_keras_model(args.keras_model)
        batch = args.batch_size or DEFAULT_BATCH_SIZE
        new = calibrate_host(model, batch, shared_host=args.shared_host, steps=steps, **on_device)
        name, image = model.name, new.entries[0].image_size
    else:
        raise UsageError("--calibrate needs --model NAME (a zoo model) or --keras-model PATH")
    entry = new.entries[0]
    if os.path.exists(args.output):
        new = HostCalibration.load(args.output).merged(new)
    new.save(args.output)
    return _calibration_summary(name, batch, image, entry, new.host, args.output)


def _transfer_rates(args) -> tuple[int, ...]:
    """``--transfer-rates`` in bits/s, after its usage check."""
    from ralp.errors import ClusterError
    from ralp.units import parse_bandwidth

    if args.transfer_rates and args.device_cpus is None:
        raise UsageError("--transfer-rates measures gRPC's CPU between two budgeted devices: "
                         "give --device-cpus")
    try:
        return tuple(parse_bandwidth(rate) for rate in args.transfer_rates)
    except ClusterError as e:
        raise UsageError(f"--transfer-rates: {e}") from None


def _lent_overlaps(args):
    """The rings' overlaps ``--overlap-from`` lends a calibration (None: measure them), after
    the usage checks of it and of ``--overlap-ratios``."""
    from lab.planner.host_calibration import HostCalibration

    if args.overlap_ratios and (args.device_cpus is None or args.model is None):
        raise UsageError("--overlap-ratios measures the rings of a zoo model's calibration on "
                         "budgeted devices: give --model NAME and --device-cpus")
    if not args.overlap_from:
        return None
    if args.device_cpus is None or args.model is None:
        raise UsageError("--calibrate --overlap-from serves a zoo model's calibration on "
                         "budgeted devices: give --model NAME and --device-cpus")
    if args.overlap_ratios:
        raise UsageError("--overlap-from takes the rings' overlaps measured before; "
                         "--overlap-ratios measures them: give one of them")
    if len(args.overlap_from) > 1:
        raise UsageError("--calibrate --overlap-from takes one calibration (of this budget)")
    return HostCalibration.load(args.overlap_from[0]).host


def _calibration_summary(name: str, batch: int, image: int, entry, host, output: str) -> str:
    return (
        f"{name} batch {batch} image {image}: whole model {entry.full_s:.4f} s, tail "
        f"(after {entry.split_after}) {entry.tail_s:.4f} s per step; a transfer costs "
        f"{host.message_s * 1e3:.2f} ms + {host.cpu_s_per_byte * 1e9:.2f} ns CPU per byte"
        + (f" + {host.cpu_s_per_message * 1e3:.3f} ms CPU per transfer"
           if host.cpu_s_per_message is not None else "")
        + (f" (Horovod's ring: {host.ring_cpu_s_per_byte * 1e9:.2f} ns)"
           if host.ring_cpu_s_per_byte is not None else "")
        + (f" (TensorFlow's ring: {host.collective_cpu_s_per_byte * 1e9:.2f} ns)"
           if host.collective_cpu_s_per_byte is not None else "")
        + "".join(f"; {ring}'s ring hides {_overlap_text(share, curve)} of the smaller of "
                  f"its wire and CPU" + (f", its wire {factor:.2f}x its bytes at the links' rate"
                                         if factor is not None else "")
                  for ring, share, curve, factor in (
                      ("Gloo", host.ring_overlap, host.ring_overlaps, host.ring_wire_factor),
                      ("TensorFlow", host.collective_overlap, host.collective_overlaps,
                       host.collective_wire_factor))
                  if share is not None or curve)
        + "".join(f"; gRPC on the fabric at {rate / 1e6:g} Mbit/s: {cost * 1e9:.2f} ns CPU per byte"
                  for rate, cost in host.fabric_cpu_s_per_byte)
        + (f"; measured on one device of {host.device_cpus:g} CPU" if host.device_cpus else
           f"; host capacity {host.capacity:.2f} concurrent steps")
        + f"; wrote {output}"
    )


def _overlap_text(share: float | None, curve: tuple) -> str:
    if not curve:
        return f"{share:.0%}"
    return ", ".join(f"{o:.0%} at wire/CPU {r:.2g}" for r, o in curve)


def bench_command(run, output: str, steps: int, earlier: Sequence[dict],
                  transfer_rate: str | None) -> list[str]:
    """The bench's calibration command for ``run``'s workload (``RALP_BENCH_CALIBRATION``):
    this module's, on the run's budget, ``steps`` timed steps; ``earlier``: the calibrations the bench took before of
    the same budget, the first whose rings' overlaps were measured lending them (they are the
    rings', not the model's: probing them again would cost minutes a workload);
    ``transfer_rate``: the simulated fabric's link rate, at which budgeted devices also
    measure gRPC's CPU per byte."""
    import json
    import os

    from lab.planner.host import OVERLAP_FIELDS
    from ralp.bench.runspec import SHARED_CPUS

    shared = run.device_cpus == SHARED_CPUS
    where = ["--shared-host"] if shared else ["--device-cpus", run.device_cpus,
                                              "--devices", str(run.devices)]
    lender = next((c for c in earlier if any(c.get("host", {}).get(name) not in (None, [], ())
                                             for name in OVERLAP_FIELDS)), None)
    reuse = []
    if lender is not None and not shared:
        lent = os.path.join(os.path.dirname(output), "overlaps.json")
        with open(lent, "w") as f:
            json.dump(lender, f)
        reuse = ["--overlap-from", lent]
    if transfer_rate and not shared:
        reuse += ["--transfer-rates", transfer_rate]
    return [sys.executable, "-m", "lab.planner.calibrate", *where, *reuse, "--model", run.model,
            "--batch-size", str(run.batch_size), "--image-size", str(run.image_size),
            "--num-classes", str(run.num_classes), "--steps", str(steps),
            "--output", output]


bench_command.each_round = True  # this host drifts: the bench asks again each round


def product_command_each_round(run, output: str, steps: int, earlier: Sequence[dict],
                               transfer_rate: str | None) -> list[str]:
    """The product's own calibration command (``RALP_BENCH_CALIBRATION`` for the lab's runs
    that take it), asked again in each round of ``--repeat``: this host drifts."""
    from ralp.bench.calibrated import calibration_command

    return calibration_command(run, output, steps, earlier, transfer_rate)


product_command_each_round.each_round = True


def main(argv: Sequence[str] | None = None) -> int:
    from ralp.planner.command import run_command

    return run_command(argv, PROG, parser=lambda prog: parser(), work=calibrate)


if __name__ == "__main__":
    sys.exit(main())
