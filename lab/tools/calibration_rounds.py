"""Does calibrating every round help the planner?

Reads budgeted bench records whose rounds each carry a calibration of their own (``python -m
ralp.bench --repeat R --calibrate``) and predicts them twice: each round from its own
calibration, and every round from the workload's first calibration, as the bench did before it
calibrated every round. Prints, for each step model (the queueing network, the layer
pipeline of the epoch's first cycles, in which these windows lie), the repeats validation's images/s errors (``python -m ralp.planner --validate``: a
setting's prediction is the median of its rounds' predictions, inside the noise band counts as
0) and each round's own |error| against its own run; and every calibration's compute. Runs
nothing.

    .venv/bin/python -m lab.tools.calibration_rounds \\
        lab/results/devices-zoo-in-epoch/devices_zoo_n4_1gbit_in_epoch.json
"""

from __future__ import annotations

import argparse
import statistics
import sys


def first_calibrations(records: list[dict]) -> dict[str, dict]:
    """Each model's earliest calibration among ``records``."""
    first: dict[str, dict] = {}
    for r in sorted(records, key=lambda r: r["calibration"]["measured_at"]):
        first.setdefault(r["model"], r["calibration"])
    return first


def compute_by_round(records: list[dict]) -> list[str]:
    seen = {}
    for r in records:
        c = r["calibration"]
        e = c["entries"][0]
        seen[(r["model"], c["measured_at"])] = (f"{r['model']:<10} round {r['round']}: whole "
                                                f"{e['full_s']:.3f} s, head {e['head_s'] or 0:.3f}"
                                                f" s, tail {e['tail_s']:.3f} s")
    return [seen[k] for k in sorted(seen)]


def report(records: list[dict]) -> list[str]:
    from lab.planner import repeats, validate
    from lab.planner.cli import _in_step_workload, _queue_workload

    first = first_calibrations(records)
    kept = [r for r in records if not repeats.flagged(r) and not r.get("error")]
    lines = ["calibrations, each round's compute:", *("  " + x for x in compute_by_round(records)),
             "", "images/s |error|, median / max: each round from the first calibration -> "
             "from its own"]
    for name, workload in (("queueing network", _queue_workload),
                           ("layer pipeline", _in_step_workload)):
        def predict(record: dict, own: bool, workload=workload) -> float:
            chosen = record if own else dict(record, calibration=first[record["model"]])
            return validate.predict_record(chosen, None, workload)

        figures = []
        for own in (False, True):
            predicted = {id(r): predict(r, own) for r in kept}  # each record once

            def setting_prediction(setting, predicted=predicted):
                return statistics.median(predicted[id(r)] for r in setting.records)

            errors = repeats.validate(repeats.settings_of(kept), setting_prediction)["errors"]
            rounds = [abs(predicted[id(r)] / r["images_per_sec"] - 1) for r in kept]
            figures.append((errors["overall"], rounds))
        (a, ra), (b, rb) = figures
        lines.append(f"  {name}: settings {a['median_abs_error']:.1%} / {a['max_abs_error']:.1%}"
                     f" -> {b['median_abs_error']:.1%} / {b['max_abs_error']:.1%}; every round "
                     f"{statistics.median(ra):.1%} / {max(ra):.1%} -> "
                     f"{statistics.median(rb):.1%} / {max(rb):.1%}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", help="a bench results JSON of budgeted, calibrated rounds")
    args = p.parse_args(argv)
    from lab.planner import repeats, validate

    records = [r for _, r in validate.load_records([args.results])
               if repeats.budgeted(r) and r.get("calibration")]
    if not records:
        print(f"{args.results}: no budgeted record with a calibration", file=sys.stderr)
        return 2
    print("\n".join(report(records)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
