"""ralp.wrap's default decision per zoo model: what it decides and how long it takes.

For each model, in one process after TensorFlow is imported: build the Keras model, then
decide as ``ralp.wrap(model, cluster)`` does without a calibration
(:func:`ralp.planner.auto.estimate_for_cluster`: the profile, this device's FLOP rates, the
predictions of plain PS and RALP, the choice). The cluster is N devices, one task each (one
PS, N - 1 workers), at the given link rate. The target is 3 s per model, build and probe
included. Each model is decided twice: with the rates this device's probe measured once at the
start and kept (``ralp.planner.rates_cache``, as every decision after a device's first), and
with a probe of its own (``RALP_PROBE_CACHE=off``, as a device's first decision; it runs
second, so its profile is a little warmer). Needs a quiet machine (it times a probe):

    .venv/bin/python benchmarks/decide_timing.py --devices 4 --bandwidth 1gbit \
        --out benchmarks/results/decide_timing.json
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
    p.add_argument("--out")
    args = p.parse_args()
    import os
    import tempfile

    import tensorflow  # noqa: F401  - imported before timing: start-up is not planning

    from ralp.cluster.spec import ClusterSpec
    from ralp.models import build_model
    from ralp.planner.auto import estimate_for_cluster
    from ralp.planner.rates_cache import device_rates

    # addresses only: nothing connects
    hosts = [f"127.0.0.1:{20000 + k}" for k in range(args.devices + 1)]
    cluster = ClusterSpec(hosts[0], tuple(hosts[1:args.devices]), (hosts[args.devices],))
    rows = []
    with tempfile.TemporaryDirectory(prefix="ralp-decide-timing-") as cache:
        os.environ["RALP_CACHE_DIR"] = cache  # a first probe on this device, kept for the rest
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
    if args.out:
        command = "benchmarks/decide_timing.py " + " ".join(
            f"--{k.replace('_', '-')} {' '.join(v) if isinstance(v, list) else v}"
            for k, v in vars(args).items() if v is not None)
        with open(args.out, "w") as f:
            json.dump({"command": command, "first_probe_s": first.probe_s, "rows": rows}, f,
                      indent=1)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
