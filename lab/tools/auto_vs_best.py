"""Mode auto against the best measured mode, per setting of recorded netns sweeps.

    .venv/bin/python -m lab.tools.auto_vs_best lab/results/stanza-sweep/bench_stanza_1gbit.json \\
        lab/results/stanza-sweep/bench_stanza_10gbit.json \\
        lab/results/auto-vs-best/bench_auto.json \\
        --compute-profile lab/results/plan-calibration/plan_calibration.json \\
        --out lab/results/auto-vs-best/auto_vs_best.json

A setting is (model, devices, bandwidth, batch, image size). Its best measured mode is the
fastest record of any fixed mode. Auto's measured throughput is the record of a
``--modes auto`` run of that setting where one is given; else the planner's choice is made
here exactly as ``--modes auto`` makes it (``ralp.bench.mode_choice.chooser``, same calibration) and
the record of that mode, with the same resources (stanza: the same FC ranks), is auto's
run: the bench would have run that very configuration. A choice no record ran is reported
as not measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from ralp._text import text_grid
from ralp.bench.mode_choice import chooser, offered_modes


def setting_of(r: dict) -> tuple:
    return (r["model"], r["devices"], r["bandwidth"], r["batch_size"], r["image_size"])


def label(mode: str, fc_workers: int | None) -> str:
    return f"stanza F={fc_workers}" if mode == "stanza" else mode


def label_of(r: dict) -> str:
    """A record's mode and, for stanza, its FC ranks (the record's ``ps``)."""
    return label(r["mode"], r["ps"])


def compare(records: list[dict], compute_profile: str) -> list[dict]:
    by_setting: dict[tuple, dict] = {}
    for r in records:
        if r.get("error") or not r.get("images_per_sec"):
            continue
        entry = by_setting.setdefault(setting_of(r), {"fixed": {}, "auto": None})
        if r.get("auto"):
            entry["auto"] = r
        else:
            entry["fixed"][label_of(r)] = r["images_per_sec"]
    choosers: dict[str, object] = {}
    rows = []
    for (model, devices, bandwidth, batch, image), entry in sorted(by_setting.items()):
        fixed = entry["fixed"]
        if not fixed:
            continue
        best = max(fixed, key=fixed.get)
        if entry["auto"] is not None:
            r = entry["auto"]
            pick = label_of(r)
            measured, source = r["images_per_sec"], "auto run"
        else:
            if bandwidth not in choosers:
                choosers[bandwidth] = chooser("netns", bandwidth, compute_profile,
                                              offered_modes(None))
            mode, why = choosers[bandwidth](model, devices, {"batch_size": batch,
                                                             "image_size": image,
                                                             "num_classes": 1000})
            pick = label(mode, why.get("fc_workers"))
            measured, source = fixed.get(pick), "the sweep's run of the pick"
        rows.append({
            "model": model, "devices": devices, "bandwidth": bandwidth, "batch_size": batch,
            "image_size": image, "auto_pick": pick, "auto_images_per_sec": measured,
            "auto_source": source if measured is not None else "not measured",
            "best_mode": best, "best_images_per_sec": fixed[best],
            "auto_vs_best": None if measured is None else measured / fixed[best],
            "measured": fixed,
        })
    return rows


def table(rows: list[dict]) -> str:
    header = ["model", "N", "link", "auto picks", "auto img/s", "best measured", "best img/s",
              "auto/best"]
    body = [[r["model"], str(r["devices"]), r["bandwidth"], r["auto_pick"],
             "-" if r["auto_images_per_sec"] is None else f"{r['auto_images_per_sec']:.1f}",
             r["best_mode"], f"{r['best_images_per_sec']:.1f}",
             "-" if r["auto_vs_best"] is None else f"{r['auto_vs_best']:.2f}"]
            for r in rows]
    ratios = [r["auto_vs_best"] for r in rows if r["auto_vs_best"] is not None]
    lines = text_grid(header, body)
    if ratios:
        lines.append(f"auto/best over {len(ratios)} settings: min {min(ratios):.2f}, median "
                     f"{statistics.median(ratios):.2f}; >= 0.95 in "
                     f"{sum(x >= 0.95 for x in ratios)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", help="bench JSON files (fixed modes, and auto runs)")
    p.add_argument("--compute-profile", required=True, help="the calibration auto predicts from")
    p.add_argument("--out", help="write the comparison as JSON")
    args = p.parse_args(argv)
    records = []
    for path in args.results:
        try:
            loaded = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            print(f"auto_vs_best: cannot read {path}: {e}", file=sys.stderr)
            return 2
        records += loaded if isinstance(loaded, list) else loaded.get("records", [])
    rows = compare(records, args.compute_profile)
    print(table(rows))
    if args.out:
        Path(args.out).write_text(json.dumps({"command": " ".join(sys.argv), "settings": rows},
                                             indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
