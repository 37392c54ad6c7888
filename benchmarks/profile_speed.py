"""How long profiling takes (issue target: under 2 s each for resnet50 and vgg19 on 2 cores).

Profiling works from shapes, so the model is built first and not counted: building allocates
and initialises the weights, which is Keras' work, not the profiler's. Both are reported.

    .venv/bin/python benchmarks/profile_speed.py [--repeats 5] [--out benchmarks/results/profile_speed.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

from ralp._cli import quiet_tensorflow  # noqa: E402

quiet_tensorflow()

import keras  # noqa: E402

import ralp  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,vgg19")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()

    records = []
    for name in args.models.split(","):
        spec = ralp.get_model_spec(name)
        start = time.perf_counter()
        model = ralp.build_model(name)
        build_s = time.perf_counter() - start
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            p = ralp.profile(model, spec.default_batch_size)
            times.append(time.perf_counter() - start)
        records.append({
            "model": name, "layers": len(p.table), "params": p.params_total,
            "build_s": round(build_s, 3), "profile_s_median": round(statistics.median(times), 4),
            "profile_s_max": round(max(times), 4), "repeats": args.repeats,
        })
        print(f"{name:10s} layers {len(p.table):4d}  build {build_s:6.2f} s  "
              f"profile median {statistics.median(times) * 1e3:8.1f} ms  max {max(times) * 1e3:8.1f} ms")
        del model
        keras.backend.clear_session(free_memory=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"machine": f"{platform.machine()}, {os.cpu_count()} cores",
                       "command": "python benchmarks/profile_speed.py", "results": records}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
