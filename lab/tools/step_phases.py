"""What does a PS-mode worker's CPU do while its link receives, and while it sends?

Reads the step timelines of ``lab/tools/step_timeline.py`` (every sample of every task) and
prints, for each worker, the seconds of its window its link only received (pulls), only sent
(pushes), did both or neither, and the mean share of its device's budget it used in each. A
worker whose forward overlapped its pulls would use most of its budget while receiving; one
whose forward waits for every read uses only gRPC's receive. Runs nothing.

    .venv/bin/python -m lab.tools.step_phases lab/results/step-timeline/step_timeline_*.json
"""

from __future__ import annotations

import argparse
import json
import statistics

ACTIVE = 0.3  # a direction counts as carrying a transfer at this share of the link's rate


def phases(series: list[list[float]], interval_s: float) -> dict[str, tuple[float, float]]:
    """{state: (seconds, mean budget share)} over samples [t, rx share, tx share, CPU share]."""
    found: dict[str, list[float]] = {"receiving": [], "sending": [], "both": [], "neither": []}
    for _, rx, tx, cpu in series:
        state = {(True, False): "receiving", (False, True): "sending",
                 (True, True): "both", (False, False): "neither"}[(rx >= ACTIVE, tx >= ACTIVE)]
        found[state].append(cpu)
    return {state: (len(cpus) * interval_s, statistics.fmean(cpus) if cpus else 0.0)
            for state, cpus in found.items()}


def report(path: str) -> list[str]:
    with open(path) as f:
        timeline = json.load(f)
    lines = [f"{timeline['run']}, {timeline['budget_cpus']} CPU per device:"]
    for task, series in timeline["series"].items():
        if task.startswith("worker"):
            cells = [f"{state} {s:.1f} s at {cpu:.2f}"
                     for state, (s, cpu) in phases(series, timeline["interval_s"]).items()]
            lines.append(f"  {task}: " + "; ".join(cells))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("timelines", nargs="+", help="step_timeline.py JSON files")
    args = parser.parse_args()
    print("each worker's window by its link's state: seconds, and its CPU as a share of its "
          "budget then")
    for path in args.timelines:
        print("\n".join(report(path)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
