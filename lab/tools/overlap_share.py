"""The planner's overlap term from measured step timelines: the share of a backward pass that
the gradients' transfers can hide behind (ralp.planner.terms.OVERLAP_SHARE).

Each timeline (``python -m lab.tools.reduction_timeline analyse``: one allreduce mode's ranks,
their steps) gives, per step, the backward pass's first start and last end and how long
before that end the first gradient's bytes went on the wire: Horovod's timeline's first
allreduce (``wire_lead_s``; Horovod queues a reduction when it is handed over and sends it
later), or, for TensorFlow's collectives (``--at-hand-over``), the reduction's start
(``lead_s``: a collective starts its ring when handed its input). A step's share is that lead
over the backward pass's length (0 where the bytes left after it ended): the part of the
backward pass that the transfers ran beside. The term is the median over every step of every
rank of every timeline given, each timeline's median beside it; steps without a wire time
(Stanza's FC ranks, whose ring Horovod's timeline does not show) are left out.

    python -m lab.tools.overlap_share TIMELINE.json... [--at-hand-over TIMELINE.json...]
        [--out SHARE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def step_shares(timeline: dict, lead: str = "wire_lead_s") -> list[float]:
    """Each step's ``lead`` over its backward pass's length, within [0, 1], for every rank
    of a timeline (steps without it left out)."""
    shares = []
    for rank in timeline["ranks"].values():
        for step in rank["steps"]:
            start, end = step["backward_s"]
            if end > start and step.get(lead) is not None:
                shares.append(min(1.0, max(0.0, step[lead] / (end - start))))
    return shares


def measure(paths: list[str], at_hand_over: tuple[str, ...] = ()) -> dict:
    """The pooled median share and each timeline's (its steps, median, min and max)."""
    every: list[float] = []
    runs = {}
    for path in [*paths, *at_hand_over]:
        lead = "lead_s" if path in at_hand_over else "wire_lead_s"
        shares = step_shares(json.loads(Path(path).read_text()), lead)
        if not shares:
            continue
        every += shares
        runs[Path(path).stem] = {"steps": len(shares), "median": statistics.median(shares),
                                 "min": min(shares), "max": max(shares)}
    if not every:
        raise SystemExit("no step with a backward pass in the timelines given")
    return {"share": statistics.median(every), "steps": len(every), "runs": runs}


def render(result: dict) -> str:
    lines = [f"{'timeline':50} {'steps':>5} {'median':>7} {'min':>5} {'max':>5}"]
    for name, run in result["runs"].items():
        lines.append(f"{name:50} {run['steps']:>5} {run['median']:>7.3f} {run['min']:>5.2f} "
                     f"{run['max']:>5.2f}")
    lines.append(f"pooled over {result['steps']} steps: share {result['share']:.3f} "
                 "(how long before the backward pass ended the first "
                 "gradient's bytes went on the wire, over the backward pass's length)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timelines", nargs="+", help="Horovod's: the wire from its timeline")
    parser.add_argument("--at-hand-over", nargs="+", default=[],
                        help="collectives': the ring starts when the reduction is handed over")
    parser.add_argument("--out", help="also write the result as JSON here")
    args = parser.parse_args(argv)
    result = measure(args.timelines, tuple(args.at_hand_over))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(render(result))


if __name__ == "__main__":
    main()
