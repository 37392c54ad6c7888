"""Where a Stanza step's time goes, measured against the planner's phases.

For each model: one ``python -m ralp.bench --modes stanza --calibrate`` run on the simulated
cluster with Horovod's timeline on (``HOROVOD_TIMELINE``), its steps cut into phases
(:mod:`lab.tools.stanza_phases`), and beside them the planner's phases for the same record,
from the calibration taken just before the run (:func:`lab.planner.stanza_step.stanza_phase_times`).

    .venv/bin/python -m lab.tools.stanza_phase_times --models alexnet vgg11 \\
        --bandwidth 10gbit --out lab/results/stanza-phases/stanza_phases.json

The measured heads' phase is the forward (with the update) plus the backward; the exchange is
both alltoalls.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository, where the bench runs


def run_one(model: str, args, workdir: Path) -> dict:
    from lab.planner.stanza_step import stanza_phase_times
    from lab.planner.validate import own_calibration
    from lab.tools.stanza_phases import median_phases, read_events, stanza_phases
    from ralp.planner.cli import zoo_workload
    from ralp.planner.modes import resources
    from ralp.units import parse_bandwidth

    timeline, out = workdir / f"{model}.timeline.json", workdir / f"{model}.json"
    command = [sys.executable, "-m", "ralp.bench", "--backend", "netns", "--bandwidth",
               args.bandwidth, "--models", model, "--modes", "stanza", "--devices",
               str(args.devices), "--batch-size", str(args.batch_size), "--image-size",
               str(args.image_size), "--steps", str(args.steps), "--warmup", "2",
               "--out", str(out)]
    env = dict(os.environ, HOROVOD_TIMELINE=str(timeline))
    subprocess.run(command, check=True, cwd=ROOT, env=env)
    record = json.loads(out.read_text())[0]  # the bench writes a list of records
    measured = median_phases(stanza_phases(read_events(timeline)))
    cal = own_calibration(record)
    key = (record["model"], record["batch_size"], record["image_size"], record["num_classes"])
    entry = cal.find(*key)
    workers, fc = resources("stanza", args.devices)
    links = zoo_workload(*key).links_on("stanza", workers, fc)
    modelled = stanza_phase_times(entry.compute, links, workers,
                                  parse_bandwidth(args.bandwidth) / 8, entry.host_for(cal.host))
    return {
        "model": model, "bandwidth": args.bandwidth, "devices": args.devices,
        "images_per_sec": record["images_per_sec"],
        "measured_s": {
            "heads": measured["heads_forward"] + measured["heads_backward"],
            "tail": measured["tail"],
            "exchange": measured["exchange_in"] + measured["exchange_out"],
            "rings": measured["ring"], "step": measured["step"],
        },
        "measured_phases_s": measured,
        "modelled_s": {**modelled, "step": sum(modelled.values())},
        "calibration": {"head_s": entry.compute.head_s, "tail_s": entry.tail_s,
                        "tail_stacked_s": entry.tail_stacked_s,
                        "capacities": entry.capacities},
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=["alexnet", "vgg11"])
    p.add_argument("--bandwidth", default="10gbit")
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--image-size", type=int, default=75)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="ralp-stanza-phases-") as tmp:
        for model in args.models:
            results.append(run_one(model, args, Path(tmp)))
            r = results[-1]
            print(
                f"\n{model} N={args.devices} {args.bandwidth}: {r['images_per_sec']:.1f} images/s"
            )
            print(f"  {'phase':10s} {'measured':>9s} {'modelled':>9s}  ratio")
            for phase in ("heads", "tail", "exchange", "rings", "step"):
                m, p_ = r["measured_s"][phase], r["modelled_s"][phase]
                ratio = f"{m / p_:5.2f}" if p_ > 0 else "    -"
                print(f"  {phase:10s} {m:8.3f}s {p_:8.3f}s  {ratio}")
    args.out.write_text(json.dumps({"command": " ".join(sys.argv), "results": results},
                                   indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
