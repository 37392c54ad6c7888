"""The simulated cluster's plan: every mode's throughput predicted by the simulated cluster's
own step models (every task on this host's cores, or on budgeted devices), the best per
setting, and the skewness rule's verdict beside it (``python -m lab.planner`` without
``--nodes``)."""


from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from lab.planner.predict import Prediction, predict, predict_stanza
from lab.planner.ps_step import Host
from ralp._cli import UsageError
from ralp.models.model_file import bench_model_argument
from ralp.planner.modes import PREDICTED_MODES, PlannerError
from ralp.planner.terms import Compute
from ralp.planner.workload import Workload
from ralp.units import parse_bandwidth


@dataclass(frozen=True)
class Recommendation:
    model: str
    batch_size: int
    skewness: float
    skewness_verdict: str  # the paper's rule: eligible for RALP or not
    predictions: tuple[Prediction, ...]  # every mode that fits each (devices, bandwidth)
    source: str = ""  # a saved model's file, which the bench's run-it line names

    def best(self) -> list[Prediction]:
        """The fastest mode per (bandwidth, devices), in input order."""
        out: dict[tuple[int, int], Prediction] = {}
        for p in self.predictions:
            key = (p.bandwidth_bits, p.devices)
            if key not in out or p.images_per_sec > out[key].images_per_sec:
                out[key] = p
        return list(out.values())

    def to_dict(self) -> dict:
        return {"model": self.model, "batch_size": self.batch_size, "skewness": self.skewness,
                "skewness_verdict": self.skewness_verdict,
                "predictions": [asdict(p) for p in self.predictions],
                "best": [asdict(p) for p in self.best()]}


def recommend(workload: Workload, compute: Compute, host: Host, devices: Sequence[int],
              bandwidths_bits: Sequence[int], modes: Sequence[str] = PREDICTED_MODES) -> Recommendation:
    """Predict every mode in ``modes`` that can run on each N of ``devices`` (plain PS needs
    an even N) at each bandwidth; stanza with its best n_c / n_f split."""
    predictions = []
    for bits in bandwidths_bits:
        for n in devices:
            for mode in modes:
                try:
                    if mode == "stanza":  # its n_c / n_f split searched, bounded by memory
                        predictions.append(predict_stanza(workload, compute, host, n, bits))
                    else:
                        predictions.append(predict(workload, compute, host, mode, n, bits))
                except PlannerError:
                    continue  # this mode cannot use N devices (plain PS on an odd N)
    if not predictions:
        raise PlannerError(f"no mode can run on {list(devices)} devices")
    p = workload.profile
    rule = "eligible" if p.eligible else "not eligible"
    verdict = f"{rule} (S = {p.skewness:.3f}, K = {p.threshold:g})"
    return Recommendation(p.model, p.batch_size, p.skewness, verdict, tuple(predictions))


def _bits_text(bits: int) -> str:
    return f"{bits / 1e9:g}gbit" if bits >= 10**9 else f"{bits / 1e6:g}mbit"


def how_to_run(rec: Recommendation, p: Prediction) -> str:
    """The settings that run prediction ``p``: the bench's command and, for PS modes, the
    ``ralp.wrap`` call (Horovod modes run inside ``horovodrun``: docs/how-to/real-cluster.md)."""
    if p.mode == "collective":  # no bench backend starts it on a real cluster
        return (f"ralp.wrap(model, mode='collective') on each of the {p.workers} workers, "
                "started with its TF_CONFIG (docs/how-to/real-cluster.md)")
    fc = f" --fc-workers {p.ps}" if p.mode == "stanza" else ""
    model = bench_model_argument(rec.source or rec.model)
    bench = (f"python -m ralp.bench --backend tf-config {model} --modes {p.mode} "
             f"--devices {p.devices}{fc} --batch-size {rec.batch_size}")
    wrap = {"ps": "ps", "ralp-h": "ralp", "ralp-n": "ralp"}.get(p.mode)
    if wrap is None:
        return bench
    return f"{bench}; or ralp.wrap(model, cluster, mode={wrap!r}) on {p.workers} workers + {p.ps} PS"


def lead(rec: Recommendation) -> list[str]:
    """The answer first: per (bandwidth, N), the best mode, its margin over the runner-up and
    over plain PS, and how to run it."""
    out = []
    by_key: dict[tuple[int, int], list[Prediction]] = {}
    for p in rec.predictions:
        by_key.setdefault((p.bandwidth_bits, p.devices), []).append(p)
    for (bits, n), found in by_key.items():
        ranked = sorted(found, key=lambda p: -p.images_per_sec)
        best = ranked[0]
        parts = [f"N={n} at {_bits_text(bits)}: {best.mode} ({best.workers} + {best.ps}), "
                 f"{best.images_per_sec:.1f} images/s"]
        if len(ranked) > 1:
            parts.append(f"{best.images_per_sec / ranked[1].images_per_sec:.2f}x the runner-up "
                         f"{ranked[1].mode}")
        ps = next((p for p in found if p.mode == "ps"), None)
        if ps is not None and best.mode != "ps":
            parts.append(f"{best.images_per_sec / ps.images_per_sec:.2f}x plain PS")
        out.append(", ".join(parts))
        out.append(f"    run it: {how_to_run(rec, best)}")
    return out


def to_csv(rec: Recommendation) -> str:
    """Every prediction, one row each (the table's figures, for scripts and spreadsheets)."""
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["model", "batch_size", "bandwidth_bits", "devices", "mode", "workers",
                     "ps", "step_time_s", "images_per_sec", "best"])
    best = {(p.bandwidth_bits, p.devices): p.mode for p in rec.best()}
    for p in rec.predictions:
        writer.writerow([rec.model, rec.batch_size, p.bandwidth_bits, p.devices, p.mode,
                         p.workers, p.ps, f"{p.step_time_s:.6g}", f"{p.images_per_sec:.6g}",
                         best[(p.bandwidth_bits, p.devices)] == p.mode])
    return buffer.getvalue()


def to_text(rec: Recommendation) -> str:
    lines = [f"{rec.model}, batch {rec.batch_size} per worker: the fastest mode", *lead(rec), "",
             f"skewness rule: {rec.skewness_verdict}", ""]
    head = f"{'bandwidth':>9} {'N':>4} " + " ".join(f"{m:>9}" for m in PREDICTED_MODES)
    lines += [head + "  best (workers + PS)", "-" * (len(head) + 22)]
    by_key = {(p.bandwidth_bits, p.devices, p.mode): p for p in rec.predictions}
    for best in rec.best():
        cells = []
        for m in PREDICTED_MODES:
            p = by_key.get((best.bandwidth_bits, best.devices, m))
            cells.append(f"{p.images_per_sec:>9.1f}" if p else f"{'-':>9}")
        lines.append(f"{_bits_text(best.bandwidth_bits):>9} {best.devices:>4} "
                     + " ".join(cells)
                     + f"  {best.mode} ({best.workers} + {best.ps})")
    lines.append("")
    lines.append("images/s predicted by the planner's per-mode models (lab.planner.ps_step)")
    return "\n".join(lines)


def plot(rec: Recommendation, path: str) -> None:
    """Throughput against devices, one panel per bandwidth, one line per mode (log-log)."""
    from ralp.planner.curves import draw

    draw(((p.bandwidth_bits, p.mode, p.devices, p.images_per_sec) for p in rec.predictions),
         PREDICTED_MODES, lambda bits: f"{rec.model} at {_bits_text(bits)}", "devices N",
         path, x_base=2)




def recommend_cli(args, workload_for: Callable[[str, int, int, int], Workload]) -> str:
    """The recommendation the CLI prints (and draws with ``--plot``)."""
    from lab.planner.host_calibration import HostCalibration, HostEntry
    from ralp.planner.calibration import measure, this_machine
    from ralp.planner.recommend import subject

    s = subject(args, workload_for)
    name, batch, image, work = s.name, s.batch, s.image, s.work
    if args.device_throughput is not None:  # the user's own device, on a real cluster
        if args.shared_host or args.compute_profile:
            raise UsageError("--device-throughput is one GPU's measured throughput on a real "
                             "cluster: drop --shared-host and --compute-profile")
        from ralp.planner.cluster_report import cluster_answer as report

        return report(args, work, s.source, None, nodes=args.devices)
    bandwidths = [parse_bandwidth(b) for b in args.bandwidth]
    cal = HostCalibration.load(args.compute_profile) if args.compute_profile else None
    try:
        entry = cal.find(name, batch, image, s.classes) if cal else None
    except PlannerError:
        entry = None
    if entry is None:  # measure it here, now (a few steps in this process)
        from ralp.planner.recommend import measure_here

        entry = HostEntry.of(measure_here(args, s, measure))
        cal = HostCalibration(Host(args.shared_host), [entry], this_machine())
    if not args.shared_host and cal.host.device_cpus is None:
        # a real cluster of N machines of one device each: the core's formulas
        from ralp.planner.cluster_report import cluster_answer as report

        return report(args, work, s.source, entry.compute, nodes=args.devices)
    # The simulated cluster: --shared-host all tasks on this host's cores, or a calibration
    # taken on one of its budgeted devices.
    host = entry.host_for(replace(cal.host, shared=args.shared_host))
    rec = replace(recommend(work, entry.compute, host, args.devices, bandwidths),
                  source=s.source)
    if args.plot:
        plot(rec, args.plot)
    csv_path = args.csv or (str(Path(args.plot).with_suffix(".csv")) if args.plot else None)
    if csv_path:
        Path(csv_path).write_text(to_csv(rec))
    return json.dumps(rec.to_dict(), indent=2) if args.format == "json" else to_text(rec)
