"""Stored bench records against their bound with the busiest device's CPU as a third side
(``ralp.bench.bound.cpu_step_s``), for records written before the bench recorded it: per
(model, link, mode), the median over rounds of step / max(compute, wire, CPU) and which
side that is, beside the old step / max(compute, wire) and each budgeted device's share of
its budget.

    .venv/bin/python -m lab.tools.bound_sides lab/results/reference-table/reference_table_1gbit.json

A dilated record keeps its step, compute and wire times in the reference device's time and
its ``cpu`` field in the host's: the CPU side is read against the host's step
(``host_step_time_s``), a ratio of two times being the same in either.

The last column reads a wire-bound step against its link used in turns (:func:`turns`): the
busiest link's bytes in both directions at its rate, per step. A link is full duplex, so that
is no bound; a step near it says the link's two directions were busy one after the other
(a PS task's pulls, then its pushes), not both at once.
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


def turns(record: dict) -> tuple[float, str] | None:
    """step / (the busiest link's bytes both ways at its rate, per step) and that link.

    The record's ``links`` count the whole run and its ``busiest_direction_bytes`` the
    measured window; each link's two directions are scaled by the same window share as the
    busiest direction's, which ``wire_step_time_s`` turns into seconds per step."""
    links, wire = record.get("links"), record.get("wire_step_time_s")
    busiest = (record.get("busiest_direction") or "").split()
    if not (links and wire and len(busiest) == 2 and links.get(busiest[0], {}).get(busiest[1])):
        return None
    per_byte = wire / links[busiest[0]][busiest[1]]  # s per step per whole-run byte
    both = {task: (row["tx"] + row["rx"]) * per_byte for task, row in links.items()}
    task = max(both, key=both.__getitem__)
    return record["step_time_s"] / both[task], task


def table(records: list[dict]) -> str:
    """One line per (model, link, mode, warm-up steps per worker): rounds, median old ratio,
    median new ratio, the side most rounds name, and the median step against the busiest
    link used in turns."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        found = sides(r)
        if found:
            found["turns"] = turns(r)
            key = (r["model"], r["bandwidth"], r["mode"], r.get("warmup"))
            groups.setdefault(key, []).append(found)
    lines = ["model       link    mode        warmup  rounds  step/max(c,w)  step/max(c,w,cpu)  "
             "side           step/turns"]
    for (model, link, mode, warmup), rows in groups.items():
        named = [row["side"] for row in rows]
        side = max(set(named), key=named.count)
        read = [row["turns"] for row in rows if row["turns"]]
        in_turns = (f"{median(t[0] for t in read):.2f} {read[0][1]}" if read else "-")
        lines.append(f"{model:<11} {link:<7} {mode:<11} {warmup or '-':>6}  {len(rows):>6}  "
                     f"{median(r['old'] for r in rows):>13.2f}  "
                     f"{median(r['new'] for r in rows):>17.2f}  {side:<13}  {in_turns}")
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
