"""Stored bench records against their bound with the busiest device's CPU as a third side
(``ralp.bench.bound.cpu_step_s``), for records written before the bench recorded it: per
(model, link, mode), the median over rounds of step / max(compute, wire, CPU) and which
side that is, beside the old step / max(compute, wire) and each budgeted device's share of
its budget.

    .venv/bin/python -m lab.tools.bound_sides lab/results/reference-table/reference_table_1gbit.json

A dilated record keeps its step, compute and wire times in the reference device's time and
its ``cpu`` field in the host's: the CPU side is read against the host's step
(``host_step_time_s``), a ratio of two times being the same in either.
"""

from __future__ import annotations

import argparse
import json
from statistics import median

from ralp.bench.bound import cpu_step_s


def sides(record: dict) -> dict | None:
    """The old ratio, the CPU side's ratio (in the host's time), the new ratio and its side."""
    if record.get("error") or not record.get("bound_ratio"):
        return None
    host_step = record.get("host_step_time_s") or record["step_time_s"]
    cpu = cpu_step_s(record)
    old = record["bound_ratio"]
    old_side = ("wire" if (record.get("wire_step_time_s") or 0)
                > (record.get("compute_step_time_s") or 0) else "compute")
    if cpu is None or host_step / cpu[0] >= old:
        return {"old": old, "new": old, "side": old_side, "cpu_share": None}
    return {"old": old, "new": host_step / cpu[0], "side": f"cpu {cpu[1]}",
            "cpu_share": cpu[0] / host_step}


def table(records: list[dict]) -> str:
    """One line per (model, link, mode): rounds, median old ratio, median new ratio, the
    side most rounds name, and the busiest device's median share of its budget."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        found = sides(r)
        if found:
            groups.setdefault((r["model"], r["bandwidth"], r["mode"]), []).append(found)
    lines = ["model       link    mode        rounds  step/max(c,w)  step/max(c,w,cpu)  side"]
    for (model, link, mode), rows in groups.items():
        named = [row["side"] for row in rows]
        side = max(set(named), key=named.count)
        lines.append(f"{model:<11} {link:<7} {mode:<11} {len(rows):>6}  "
                     f"{median(r['old'] for r in rows):>13.2f}  "
                     f"{median(r['new'] for r in rows):>17.2f}  {side}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("records", nargs="+", help="bench JSON files")
    args = p.parse_args()
    records: list[dict] = []
    for path in args.records:
        with open(path) as f:
            records += json.load(f)
    print(table(records))


if __name__ == "__main__":
    main()
