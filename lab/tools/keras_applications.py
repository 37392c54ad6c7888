"""The profiler's decision for one model of every ``keras.applications`` family.

Users bring their own Keras models; these are the real-world ones Keras ships. Each is built
with ``weights=None`` (nothing is downloaded) at the smallest input its family builds at (or
``--image-size``), 1000 classes, and profiled at a batch of 32 with the byte model's default
cluster (4 workers, 1 PS). Prints a table; ``--out`` writes the records as JSON.

    .venv/bin/python -m lab.tools.keras_applications \\
        --out lab/results/keras-applications/keras_applications.json
    .venv/bin/python -m lab.tools.keras_applications --image-size 224 \\
        --out lab/results/keras-applications/keras_applications_224.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

# family -> (the model built, the smallest square input it builds at with weights=None)
FAMILIES: dict[str, tuple[str, int]] = {
    "VGG": ("VGG16", 32),
    "ResNet": ("ResNet50", 32),
    "ResNetV2": ("ResNet50V2", 32),
    "Inception V3": ("InceptionV3", 75),
    "Inception-ResNet V2": ("InceptionResNetV2", 75),
    "Xception": ("Xception", 71),
    "MobileNet V1": ("MobileNet", 32),
    "MobileNet V2": ("MobileNetV2", 32),
    "MobileNet V3": ("MobileNetV3Small", 32),
    "DenseNet": ("DenseNet121", 32),
    "NASNet": ("NASNetMobile", 32),
    "EfficientNet": ("EfficientNetB0", 32),
    "EfficientNet V2": ("EfficientNetV2B0", 32),
    "ConvNeXt": ("ConvNeXtTiny", 32),
}
BATCH = 32


def _keras_ops_nodes(model) -> int:
    """How many keras.ops nodes (Operations that are not layers) the model's graphs hold."""
    import keras

    count = 0
    for op in model.operations if hasattr(model, "operations") else model.layers:
        if isinstance(op, keras.Model):
            count += _keras_ops_nodes(op)
        elif not isinstance(op, keras.layers.Layer):
            count += 1
    return count


def profile_family(family: str, name: str, size: int) -> dict:
    import keras

    import ralp

    start = time.perf_counter()
    model = getattr(keras.applications, name)(weights=None, input_shape=(size, size, 3))
    built = time.perf_counter()
    p = ralp.profile(model, BATCH)
    profiled = time.perf_counter()
    t = p.bytes_per_step
    kinds: dict[str, int] = {}
    for row in p.table.rows:
        kinds[row.kind] = kinds.get(row.kind, 0) + 1
    record = {
        "family": family, "model": name, "image_size": size, "batch_size": BATCH,
        "params": p.params_total, "rows": len(p.table.rows), "positions": p.positions,
        "kinds": kinds, "ops_rows": _keras_ops_nodes(model),
        "skewness": p.skewness, "eligible": p.eligible, "split_after": p.split_after,
        "candidate_split_after": p.candidate_split_after,
        "offloaded_share": p.offloaded_params / max(1, p.params_total),
        "ralp_over_ps_bytes": t["ralp"].total / max(1, t["ps"].total),
        "busiest_link_bytes": p.busiest_link_bytes, "verdict": p.verdict,
        "build_s": round(built - start, 3), "profile_s": round(profiled - built, 3),
    }
    del model
    keras.backend.clear_session(free_memory=True)
    return record


def table(records: list[dict]) -> str:
    from ralp._text import text_grid

    header = ["family", "model", "px", "params", "rows", "ops", "pos", "S", "eligible",
              "split after", "offloaded", "ralp/ps", "build s", "profile s"]
    body = []
    for r in records:
        if "error" in r:
            body.append([r["family"], r["model"], str(r["image_size"]), "ERROR", "", "", "", "",
                         "", r["error"][:60], "", "", "", ""])
            continue
        split = r["split_after"] or (
            f"- ({r['candidate_split_after']})" if r["candidate_split_after"] else "- (none)"
        )
        body.append([
            r["family"], r["model"], str(r["image_size"]), f"{r['params'] / 1e6:.1f}M",
            str(r["rows"]), str(r["ops_rows"]), str(r["positions"]), f"{r['skewness']:+.3f}",
            "yes" if r["eligible"] else "no", split,
            f"{r['offloaded_share']:.1%}" if r["split_after"] else "-",
            f"{r['ralp_over_ps_bytes']:.3f}", f"{r['build_s']:.1f}", f"{r['profile_s']:.3f}",
        ])
    note = (f"batch {BATCH}, 1000 classes, weights=None, threshold K = -0.5, bytes for 4 "
            "workers + 1 PS; 'ops': keras.ops rows; 'pos': skewness positions; split after "
            "'-': no split (not eligible: the best admissible split in parentheses; '(none)': "
            "no parameters after the last convolution to offload, e.g. a Conv2D classifier)")
    return "\n".join([*text_grid(header, body), "", note])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-size", type=int, help="every model at this size "
                        "(default: each family's smallest)")
    parser.add_argument("--families", nargs="+", choices=sorted(FAMILIES), metavar="FAMILY",
                        help="only these families (default: all)")
    parser.add_argument("--out", help="write the records as JSON here")
    args = parser.parse_args(argv)
    from ralp._cli import quiet_tensorflow

    quiet_tensorflow()
    records = []
    for family in args.families or FAMILIES:
        name, smallest = FAMILIES[family]
        size = args.image_size or smallest
        try:
            records.append(profile_family(family, name, size))
        except Exception as e:  # noqa: BLE001 - one family failing is a result, not a stop
            records.append({"family": family, "model": name, "image_size": size,
                            "error": f"{type(e).__name__}: {e}"})
        print(f"{family}: done", file=sys.stderr)
    print(table(records))
    if args.out:
        Path(args.out).write_text(json.dumps(records, indent=2) + "\n")
    return 1 if any("error" in r for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
