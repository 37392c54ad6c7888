"""The bench's pace probe alone and on every device at once: does one device's probe see what
the devices meet when all of them compute (a host whose CPUs the budgets and a load beside
them fill)? Each probe is the reference device's training step timed inside one device's
budget (:func:`ralp.bench.pace.measure_pace`'s); ``--rounds`` alternates alone and together.

    .venv/bin/python -m lab.tools.probe_contention --device-cpus 0.25 --devices 4 --rounds 2
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
from statistics import median

from ralp.bench.pace import PROBE_STEPS, PROBE_TIMEOUT_S, REFERENCE_DEVICE, probe_step
from ralp.cluster.fresh_process import run_in_fresh_process
from ralp.emulation.budget import budget_for


def probe_steps(device_cpus: str, devices: int, at_once: int) -> list[float]:
    """The probe's step in ``at_once`` devices of a ``devices``-device budget, all started
    together, each in its own group."""
    budget = budget_for(device_cpus, devices)
    if budget.cpus is None:
        raise SystemExit("probe_contention: the devices need a CPU budget (root, cgroups)")
    names = [f"probe{k}" for k in range(at_once)]
    with budget.groups(names) as groups, ThreadPoolExecutor(at_once) as pool:
        futures = [pool.submit(run_in_fresh_process, probe_step, REFERENCE_DEVICE,
                               PROBE_STEPS, group=groups.group(name), env=budget.task_env(),
                               timeout=PROBE_TIMEOUT_S) for name in names]
        return [f.result() for f in futures]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.tools.probe_contention", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device-cpus", default="0.25")
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)
    seen: dict[str, list[float]] = {"alone": [], "together": []}
    for r in range(args.rounds):
        for how, at_once in (("alone", 1), ("together", args.devices)):
            steps = probe_steps(args.device_cpus, args.devices, at_once)
            paces = [REFERENCE_DEVICE.step_s / s for s in steps]
            seen[how].append(median(paces))
            print(f"round {r + 1} {how}: pace {', '.join(f'{v:.3f}' for v in paces)}", flush=True)
    alone, together = median(seen["alone"]), median(seen["together"])
    print(f"median pace alone {alone:.3f}, {args.devices} at once {together:.3f} "
          f"(together / alone {together / alone:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
