"""Rendering a :class:`Profile`: a summary-style text table, JSON and CSV.

Rows and decisions are typed values (``Profile``, ``LayerRow``); this module only formats them.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence

from ralp._text import human_bytes, human_count, text_grid
from ralp.modes import HOROVOD, PS, RALP
from ralp.profiler.api import Profile
from ralp.profiler.layer_table import LayerRow

LAYER_COLUMNS = [f for f in LayerRow.__dataclass_fields__]


def to_dict(p: Profile) -> dict:
    """The JSON contract of ``python -m ralp.profiler --format json``."""
    traffic = p.bytes_per_step
    return {
        "model": p.model,
        "batch_size": p.batch_size,
        "workers": p.workers,
        "ps": p.ps,
        "params_total": p.params_total,
        "param_bytes_total": p.table.param_bytes_total,
        "flops_per_sample": sum(r.flops for r in p.table.rows),
        "skewness": p.skewness,
        "skewness_positions": p.positions,
        "position_weights": p.table.position_weights,
        "threshold": p.threshold,
        "eligible": p.eligible,
        "split_after": p.split_after,
        "candidate_split_after": p.candidate_split_after,
        "offloaded_layers": p.offloaded_layers,
        "offloaded_params": p.offloaded_params,
        "boundary_layers": list(p.boundary_layers),
        "boundary_bytes_per_step": p.boundary_bytes,
        "verdict": p.verdict,
        "refusal": p.refusal,
        "bytes_per_step": {mode: t.total for mode, t in traffic.items()},
        "busiest_link_bytes": p.busiest_link_bytes,
        "traffic": {mode: t.to_dict() for mode, t in traffic.items()},
        "layers": [r.to_dict() for r in p.table.rows],
    }


def to_json(p: Profile) -> str:
    return json.dumps(to_dict(p), indent=2)


def layers_csv(p: Profile) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["model", *LAYER_COLUMNS, "offloaded"])
    offloaded = set(p.offloaded_layers)
    for r in p.table.rows:
        d = r.to_dict()
        d["output_shape"] = "x".join(map(str, r.output_shape))
        d["inbound"] = " ".join(r.inbound)
        writer.writerow([p.model, *(d[c] for c in LAYER_COLUMNS), r.name in offloaded])
    return out.getvalue()


def to_text(p: Profile) -> str:
    t = p.bytes_per_step
    ps_total = max(1, t[PS].total)
    lines = [
        f'Model "{p.model}"   batch {p.batch_size}   params {p.params_total:,} '
        f"({human_bytes(p.table.param_bytes_total)})   "
        f"forward {human_count(sum(r.flops for r in p.table.rows))}FLOPs/sample",
        f"Skewness S = {p.skewness:.4f} over {p.positions} positions   threshold K = "
        f"{p.threshold:g}   -> {'ELIGIBLE' if p.eligible else 'not eligible'}",
        f"Split after: {p.split_after or '-'}"
        + (
            f" (candidate: {p.candidate_split_after})"
            if not p.eligible and p.candidate_split_after
            else ""
        ),
        f"Bytes per step (W={p.workers} workers, M={p.ps} PS): "
        f"ps {human_bytes(t[PS].total)}   horovod {human_bytes(t[HOROVOD].total)}   "
        f"ralp {human_bytes(t[RALP].total)} ({t[RALP].total / ps_total:.3f}x of ps)",
        "Busiest link per step (busier direction): "
        + "   ".join(f"{mode} {human_bytes(n)}" for mode, n in p.busiest_link_bytes.items()),
        f"Verdict: {p.verdict}",
        "",
        "pos: the row's position in S (every conv, pool and fc row holds one); (n): its "
        "parameters count at position n (a norm's at its convolution's)",
    ]
    header = [
        "#",
        "layer",
        "type",
        "kind",
        "pos",
        "params",
        "output",
        "out/step",
        "FLOPs/sample",
        "cum. params",
    ]
    body = []
    for r in p.table.rows:
        body.append([
            str(r.index), r.name, r.layer_type, r.kind, _position_cell(r), f"{r.params:,}",
            "x".join(map(str, r.output_shape)), human_bytes(r.output_bytes),
            human_count(r.flops), f"{r.cumulative_params:,}",
        ])
    split_at = p.split.index if p.split_after is not None else None
    lines += text_grid(
        header, body, divider_after=split_at, divider="split: rows below run on the PS"
    )
    return "\n".join(lines)


def _position_cell(r: LayerRow) -> str:
    if r.position is not None:
        return str(r.position)
    return "" if r.counted_at is None else f"({r.counted_at})"


def summary_text(profiles: Sequence[Profile]) -> str:
    """One row per model: the decision and what it buys (``--all``)."""
    header = ["model", "batch", "params", "S", "pos", "eligible", "split after", "offloaded",
              "ps B/step", "ralp B/step", "horovod B/step", "ralp/ps"]
    body = []
    for p in profiles:
        t = p.bytes_per_step
        share = p.offloaded_params / max(1, p.params_total)
        body.append([
            p.model, str(p.batch_size), human_count(p.params_total), f"{p.skewness:+.3f}",
            str(p.positions), "yes" if p.eligible else "no", p.split_after or "-",
            f"{share:.1%}" if p.split_after else "-",
            human_bytes(t[PS].total), human_bytes(t[RALP].total),
            human_bytes(t[HOROVOD].total), f"{t[RALP].total / max(1, t[PS].total):.3f}",
        ])
    workers, ps = (profiles[0].workers, profiles[0].ps) if profiles else (1, 1)
    note = (f"threshold K = {profiles[0].threshold:g}; S over 'pos' positions (every conv, pool "
            f"and fc layer); bytes per step with W={workers} workers, M={ps} PS"
            if profiles else "")
    return "\n".join([*text_grid(header, body), "", note])


def summary_csv(profiles: Sequence[Profile]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["model", "batch_size", "params_total", "skewness", "skewness_positions",
                     "threshold", "eligible",
                     "split_after", "offloaded_params", "ps_bytes", "ralp_bytes", "horovod_bytes"])
    for p in profiles:
        t = p.bytes_per_step
        writer.writerow([p.model, p.batch_size, p.params_total, p.skewness, p.positions,
                         p.threshold,
                         p.eligible, p.split_after or "", p.offloaded_params,
                         t[PS].total, t[RALP].total, t[HOROVOD].total])
    return out.getvalue()
