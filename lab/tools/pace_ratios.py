"""Sum up runs of one matrix under several host settings (pace-dilation's ``busier``): the
bench's records of each setting and round in ``FOLDER/SETTING_ROUND.json``. For each setting
and model: each mode's images/s over plain PS's in the same round (the reference device's
time), their median over the rounds with min-max, and how far that median lies from the
reference setting's; beside them the setting's paces (each round's before its runs ->
after them), and how many of its records the bench marked (the host did not keep up, or the
pace did not hold).

    .venv/bin/python -m lab.tools.pace_ratios lab/results/pace-dilation/busier \\
        --reference quiet-0.425
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from statistics import median

MODES = ("ralp-n", "horovod", "stanza")  # each over plain PS
BASELINE = "ps"


def part_records(folder: Path) -> dict[str, list[dict]]:
    """Each setting's records, every record with its part's round, in the parts' order."""
    parts: dict[str, list[dict]] = {}
    for path in sorted(folder.glob("*_*.json")):
        found = re.fullmatch(r"(.+)_(\d+)\.json", path.name)
        if found:
            records = json.loads(path.read_text())
            parts.setdefault(found[1], []).extend(
                {**r, "round": int(found[2])} for r in records)
    return parts


def round_ratios(records: list[dict]) -> dict[tuple[str, str], list[float]]:
    """(model, mode): each round's images/s over plain PS's of the same model and round."""
    ok = [r for r in records if not r.get("error") and r.get("images_per_sec")]
    base = {(r["model"], r["round"]): r["images_per_sec"] for r in ok if r["mode"] == BASELINE}
    out: dict[tuple[str, str], list[float]] = {}
    for r in ok:
        ps = base.get((r["model"], r["round"]))
        if r["mode"] in MODES and ps:
            out.setdefault((r["model"], r["mode"]), []).append(r["images_per_sec"] / ps)
    return out


def paces(records: list[dict]) -> str:
    """Each round's pace before its runs -> after them, once per round."""
    seen = {}
    for r in records:
        if r.get("device_pace") is not None:
            seen.setdefault(r["round"], (r["device_pace"], r.get("device_pace_after")))
    return ", ".join(f"{b:.2f}->{'-' if a is None else f'{a:.2f}'}"
                     for _, (b, a) in sorted(seen.items())) or "-"


def marked(records: list[dict]) -> str:
    """How many records the bench marked, and why."""
    kept = sum(1 for r in records if r.get("host_kept_up") is False)
    moved = sum(1 for r in records if r.get("pace_held") is False)
    return f"{kept} not kept up, {moved} pace moved, of {len(records)}"


def _cell(values: list[float], reference: float | None) -> str:
    mid = median(values)
    text = f"{mid:.2f}x [{min(values):.2f}-{max(values):.2f}]"
    return text if reference is None else f"{text} ({mid / reference - 1:+.0%})"


def summary(parts: dict[str, list[dict]], reference: str) -> str:
    """The table: one line per setting and model, a ratio cell per mode."""
    ref = {key: median(v) for key, v in round_ratios(parts.get(reference, [])).items()}
    models = list(dict.fromkeys(r["model"] for records in parts.values() for r in records))
    lines = [f"each mode's images/s over plain PS's in its round: median over the rounds "
             f"[min-max] (against {reference}'s median)",
             "setting | model | " + " | ".join(f"{m} / ps" for m in MODES)]
    for setting, records in parts.items():
        ratios = round_ratios(records)
        lines.append(f"-- {setting}: device_cpus {records[0].get('device_cpus')}, paces "
                     f"{paces(records)}; {marked(records)}")
        for model in models:
            cells = [_cell(ratios[(model, m)], None if setting == reference
                           else ref.get((model, m))) if ratios.get((model, m)) else "-"
                     for m in MODES]
            lines.append(f"{setting} | {model} | " + " | ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.tools.pace_ratios", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path, help="the parts: SETTING_ROUND.json")
    p.add_argument("--reference", required=True, help="the setting the others are read against")
    args = p.parse_args(argv)
    parts = part_records(args.folder)
    if args.reference not in parts:
        p.error(f"no records of {args.reference!r} in {args.folder}: {', '.join(parts) or 'none'}")
    print(summary(parts, args.reference))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
