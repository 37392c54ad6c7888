"""Which decision margin picks the faster of plain PS and RALP, where the margins disagree?

Reads the lab's recorded validations of the planner on the simulated cluster's budgeted
devices (``lab/results/*/*validation*.txt``: each setting's measured and predicted images/s
per mode; the step-model variants, whose file names carry ``_queue``, ``_wire`` and the like,
left out) and the auto-local records (``ralp.wrap``'s prediction on a ``LocalCluster`` beside
ps and ralp measured). For every setting where RALP (ralp-n on the simulated cluster) is
predicted faster than plain PS by 2-15% (where a 2% margin and a 15% band disagree), each
margin's pick, and whether it is the faster measured mode (a measured difference under 2% is
a tie: either pick is right).

    .venv/bin/python -m lab.tools.decision_margin lab/results/auto-local/auto_local.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"
MARGINS = (0.02, 0.05, 0.15)
VARIANTS = ("_queue", "_wire", "_curve", "_fabric", "_in_step", "_calibrated", "fit_half")
ROW = re.compile(r"(\S+)\s+(\d+)\s+(\S+)\s+(ps|ralp-n)\s+\d+\s+([\d.]+)\s+\[[^\]]*\]\s+([\d.]+)")
MEASURED_TIE = 0.02


def simulated_settings() -> list[dict]:
    """(source, setting, predicted and measured ralp-n / ps) from the recorded validations."""
    found: dict[tuple, dict] = {}
    for path in sorted(RESULTS.glob("*/*validation*.txt")):
        if any(v in path.name for v in VARIANTS):
            continue
        for line in path.read_text().splitlines():
            m = ROW.match(line)
            if m:
                model, n, link, mode, measured, predicted = m.groups()
                key = (f"{path.parent.name}/{path.name}", f"{model} N={n} {link}")
                found.setdefault(key, {})[mode] = (float(measured), float(predicted))
    return [{"source": src, "setting": setting,
             "predicted": v["ralp-n"][1] / v["ps"][1], "measured": [v["ralp-n"][0] / v["ps"][0]]}
            for (src, setting), v in sorted(found.items()) if {"ps", "ralp-n"} <= set(v)]


def local_settings(path: str) -> list[dict]:
    """The auto-local records: per model, its rounds' measured ralp / ps."""
    by_model: dict[str, dict] = {}
    for row in json.loads(Path(path).read_text()):
        pred, meas = row["predicted"].get("images_per_sec", {}), row["measured"]
        if not {"ps", "ralp"} <= set(pred) or any("error" in meas[m] for m in ("ps", "ralp")):
            continue
        entry = by_model.setdefault(row["model"], {
            "source": Path(path).name, "setting": f"{row['model']} LocalCluster 2+1",
            "predicted": pred["ralp"] / pred["ps"], "measured": []})
        entry["measured"].append(meas["ralp"]["images_per_sec"] / meas["ps"]["images_per_sec"])
    return list(by_model.values())


def judged(setting: dict) -> dict:
    """Each margin's pick, and whether it is the faster measured (or a measured tie)."""
    measured = statistics.median(setting["measured"])
    faster = None if abs(measured - 1) < MEASURED_TIE else ("ralp" if measured > 1 else "ps")
    picks = {m: "ralp" if setting["predicted"] > 1 + m else "ps" for m in MARGINS}
    return {**setting, "measured_median": measured, "picks": picks,
            "right": {m: faster is None or p == faster for m, p in picks.items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.tools.decision_margin",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("local", nargs="*", help="auto-local JSON records")
    p.add_argument("--out", help="JSON of every setting judged")
    args = p.parse_args(argv)
    settings = simulated_settings() + [s for path in args.local for s in local_settings(path)]
    rows = [judged(s) for s in settings if 1.02 < s["predicted"] <= 1.15]
    print(f"{'setting':<28} {'records':<46} predicted measured  " +
          "  ".join(f"{m:.0%}" for m in MARGINS))
    for r in rows:
        marks = "  ".join(f"{r['picks'][m]:<4}{'' if r['right'][m] else '!'}" for m in MARGINS)
        print(f"{r['setting']:<28} {r['source'][:46]:<46} {r['predicted']:9.3f} "
              f"{r['measured_median']:8.3f}  {marks}")
    print("picked the slower mode (!): " + ", ".join(
        f"{m:.0%} {sum(not r['right'][m] for r in rows)} of {len(rows)}" for m in MARGINS))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
