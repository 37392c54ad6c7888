"""ralp.wrap's default decision per zoo model: what it decides and how long it takes.

For each model, in one process after TensorFlow is imported: build the Keras model, then
decide as ``ralp.wrap(model, cluster)`` does without a calibration
(:func:`ralp.planner.auto.estimate_for_cluster`: the profile, this device's FLOP rates, the
predictions of plain PS and RALP, the choice). The cluster is N devices, one task each (one
PS, N - 1 workers), at the given link rate. The target is 3 s per model, build and probe
included. Each model is decided twice: with the rates this device's probe measured once at the
start and kept (``ralp.planner.rates_cache``, as every decision after a device's first), and
with a probe of its own (``RALP_PROBE_CACHE=off``, as a device's first decision; it runs
second, so its profile is a little warmer). Each round
(``--repeat``) starts with a cache of its own; the summary gives each time's median [min-max]
over the rounds. Needs a quiet machine (it times a probe):

    .venv/bin/python -m lab.tools.decide_timing --devices 4 --bandwidth 1gbit --repeat 3 \
        --out lab/results/decide-timing/decide_timing.json
"""

from __future__ import annotations

import argparse
import json
import time

ZOO = ["vgg11", "alexnet", "overfeat", "resnet50", "inception3"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=ZOO)
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--bandwidth", default="1gbit")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--image-size", type=int, default=75)
    p.add_argument("--repeat", type=int, default=3, help="rounds, each with a first probe")
    p.add_argument("--out")
    args = p.parse_args()
    import tensorflow  # noqa: F401  - imported before timing: start-up is not planning

    from ralp.cluster.spec import ClusterSpec

    # addresses only: nothing connects
    hosts = [f"127.0.0.1:{20000 + k}" for k in range(args.devices + 1)]
    cluster = ClusterSpec(hosts[0], tuple(hosts[1:args.devices]), (hosts[args.devices],))
    rounds = [_round(args, cluster) for _ in range(args.repeat)]
    summary = _summary(args.models, rounds)
    if args.out:
        command = "python -m lab.tools.decide_timing " + " ".join(
            f"--{k.replace('_', '-')} {' '.join(v) if isinstance(v, list) else v}"
            for k, v in vars(args).items() if v is not None)
        with open(args.out, "w") as f:
            json.dump({"command": command, "summary": summary, "rounds": rounds}, f, indent=1)
        print(f"wrote {args.out}")


def _round(args, cluster) -> dict:
    """Every model built and decided once with kept rates and once with a probe of its own,
    after a first probe in a cache of this round's own."""
    import os
    import tempfile

    from ralp.models import build_model
    from ralp.planner.auto import estimate_for_cluster
    from ralp.planner.rates_cache import device_rates, forget_in_process

    rows = []
    with tempfile.TemporaryDirectory(prefix="ralp-decide-timing-") as cache:
        os.environ["RALP_CACHE_DIR"] = cache  # a first probe on this device, kept for the rest
        forget_in_process()  # as a new process: the previous round's rates are not in memory
        first = device_rates()
        print(f"this device's first probe: {first.probe_s:.2f} s")
        print(f"{'model':<11} {'build s':>8} {'decide s':>9} {'total s':>8} {'probing s':>10}"
              "  decision (rule)")
        for name in args.models:
            start = time.perf_counter()
            model = build_model(name, 1000, args.image_size)
            built = time.perf_counter()
            choice = estimate_for_cluster(model, cluster, args.bandwidth,
                                          batch_size=args.batch_size)
            done = time.perf_counter()
            os.environ["RALP_PROBE_CACHE"] = "off"
            probing = time.perf_counter()
            estimate_for_cluster(model, cluster, args.bandwidth, batch_size=args.batch_size)
            probed = time.perf_counter() - probing
            del os.environ["RALP_PROBE_CACHE"]
            rule = "rule: eligible" if "not eligible" not in choice.rule else "rule: not eligible"
            print(f"{name:<11} {built - start:>8.2f} {done - built:>9.2f} {done - start:>8.2f} "
                  f"{built - start + probed:>10.2f}  {choice.mode} ({rule})")
            rows.append({"model": name, "build_s": built - start, "decide_s": done - built,
                         "total_s": done - start, "decide_probing_s": probed,
                         "total_probing_s": built - start + probed, "chosen": choice.mode,
                         "why": choice.why})
    return {"first_probe_s": first.probe_s, "rows": rows}


def _summary(models: list[str], rounds: list[dict]) -> list[dict]:
    """Per model, the median [min-max] over rounds of each time, printed and returned."""
    import statistics

    keys = ("build_s", "decide_s", "total_s", "decide_probing_s", "total_probing_s")
    print(f"\nmedian [min-max] over {len(rounds)} rounds")
    print(f"{'model':<11} {'build s':>17} {'total, kept rates s':>20} {'total, probing s':>20}")
    out = []
    for name in models:
        rows = [row for r in rounds for row in r["rows"] if row["model"] == name]
        spread = {key: [statistics.median(v := [row[key] for row in rows]), min(v), max(v)]
                  for key in keys}
        out.append({"model": name, **spread, "chosen": sorted({row["chosen"] for row in rows})})
        cells = [(_band(spread[key]), w) for key, w in
                 (("build_s", 17), ("total_s", 20), ("total_probing_s", 20))]
        print(f"{name:<11}" + "".join(f" {cell:>{w}}" for cell, w in cells))
    return out


def _band(values: list[float]) -> str:
    median, low, high = values
    return f"{median:.2f} [{low:.2f}-{high:.2f}]"


if __name__ == "__main__":
    main()
