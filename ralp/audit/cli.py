"""``python -m ralp.audit``: where every op of one real training step runs, and what crosses."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from ralp._cli import fail, interrupt_on_sigterm, positive_int, quiet_tensorflow
from ralp.modes import PS, RALP

PROG = "python -m ralp.audit"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Trace one real training step of a zoo model on a local cluster (real "
        "tf.distribute.Server processes) and report every op's device by layer, every tensor "
        "crossing a task boundary, and the bytes per step against the profiler's byte model.",
    )
    p.add_argument("--model", required=True, help="a zoo model (python -m ralp.profiler --list)")
    p.add_argument("--mode", choices=(RALP, PS), default=RALP)
    p.add_argument("--workers", type=positive_int, default=1)
    p.add_argument("--ps", type=positive_int, default=1)
    p.add_argument(
        "--image-size", type=positive_int, help="scale the model down (default: its own)"
    )
    p.add_argument("--batch-size", type=positive_int, help="default: the model's benchmark default")
    p.add_argument("--num-classes", type=positive_int, default=1000)
    p.add_argument("--sync", choices=("bsp",), help="audit BSP's step (gradients into the "
                   "round's accumulators) instead of the asynchronous one")
    p.add_argument("--pulls", choices=("default", "layer", "ibatch"), default="default",
                   help="how workers pull their variables (iBatch's packed pulls)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--timeout", type=positive_int, default=600, help="seconds (default 600)")
    return p


def run(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    quiet_tensorflow()
    from ralp.audit.step_audit import AuditSettings, audit
    from ralp.cluster.fresh_process import ChildError
    from ralp.cluster.spec import ClusterError
    from ralp.models import MODEL_NAMES, get_model_spec

    if args.model not in MODEL_NAMES:
        return fail(PROG, f"unknown model {args.model!r}; choose one of: {', '.join(MODEL_NAMES)}")
    minimum = get_model_spec(args.model).min_image_size
    if args.image_size is not None and args.image_size < minimum:
        return fail(
            PROG,
            f"--image-size {args.image_size} is too small for {args.model}: the minimum is {minimum}",
        )
    settings = AuditSettings(args.model, args.mode, args.workers, args.ps, args.image_size,
                             args.batch_size, args.num_classes, sync=args.sync, pulls=args.pulls)
    interrupt_on_sigterm()
    try:
        report = audit(settings, timeout=args.timeout)
    except (ClusterError, ChildError) as e:
        return fail(PROG, f"the audit failed: {e}")
    except KeyboardInterrupt:  # its cluster and job processes stop as the stack unwinds
        print(f"{PROG}: interrupted; everything it started was stopped", file=sys.stderr)
        return 130
    print(json.dumps(report, indent=2) if args.format == "json" else to_text(report))
    return 0


def to_text(r: dict) -> str:
    from ralp._text import human_bytes, text_grid

    lines = [
        f"Audit of {r['model']} (image {r['image_size']}, batch {r['batch_size']}) in mode "
        f"{r['mode']!r}{' under ' + r['sync'] if r['sync'] else ''}: {r['workers']} worker(s), "
        f"{r['ps']} PS task(s); step {r['step_function']}",
        f"Offloaded layers: {', '.join(r['offloaded_layers']) or '-'}",
        f"Misplaced ops of offloaded layers: {len(r['misplaced_ops'])}",
        f"Offloaded-variable bytes crossing per step: {human_bytes(r['offloaded_variable_bytes_crossing'])}"
        f"  (layers checked: {', '.join(r['reference_layers']) or '-'})",
        f"Bytes crossing per step: {human_bytes(r['crossing_bytes_per_step'])} measured in the "
        f"partitions, {human_bytes(r['model_bytes_per_step'])} predicted by the byte model "
        f"(ratio {r['crossing_to_model_ratio']:.4f})",
        *([f"Packed pulls: {r['pull_messages']} messages, {human_bytes(r['pull_bytes'])} "
           f"(the worker's variables: {human_bytes(r['pull_bytes_model'])}; "
           f"{r['pull_batches']} batches)"] if r["pulls"] != "default" else []),
        "",
        "Per link, one worker batch:",
    ]
    lines += [
        f"  {link:22s} {human_bytes(n):>10s}" for link, n in r["links_per_worker_batch"].items()
    ]
    lines += ["", "Ops per layer and device:"]
    devices = sorted({d for counts in r["layers"].values() for d in counts})
    short = [d.replace("/replica:0", "").replace("/device:", " ") for d in devices]
    body = [
        [layer, *(str(counts.get(d, 0)) for d in devices)] for layer, counts in r["layers"].items()
    ]
    lines += text_grid(["layer", *short], body)
    if r["misplaced_ops"]:
        lines += ["", "Misplaced ops:"] + [f"  {m['op']} on {m['device']} (expected {m['expected']})"
                                           for m in r["misplaced_ops"][:20]]
    big = sorted(r["crossings"], key=lambda c: -(c["bytes"] or 0))[:10]
    lines += ["", "Largest crossing tensors (one worker batch):"]
    lines += [f"  {c['src']:>9s} -> {c['dst']:<9s} {human_bytes(c['bytes'] or 0):>10s}  {c['tensor']}"
              + ("  [offloaded variable]" if c["offloaded_variable"] else "") for c in big]
    return "\n".join(lines)


def main() -> None:
    sys.exit(run())
