"""Does the planner give the same answer with and without a calibration on this host?

For each model (the zoo, and two models outside it saved as ``.keras`` files: a keras.io-style
convnet and ``keras.applications.MobileNetV2``), plan a real cluster twice, as a user would:

- uncalibrated: ``python -m ralp.planner --model M --devices N ... --format json`` (the model
  measured here, in that process);
- calibrated: ``python -m ralp.planner --calibrate --model M ... --output cal.json``, then
  the same plan with ``--compute-profile cal.json``;

and compare the best mode per setting.

    python -m lab.tools.calibrated_paths --output lab/results/calibrated-paths/calibrated_paths.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ZOO = ("alexnet", "googlenet", "inception3", "lenet", "overfeat", "resnet50", "vgg11", "vgg16",
       "vgg19")
BATCH, IMAGE = 8, 75
DEVICES = ("4", "16")
BANDWIDTHS = ("1gbit", "10gbit")


def _outside_models(folder: str) -> list[str]:
    import keras

    inputs = keras.Input((IMAGE, IMAGE, 3))
    x = keras.layers.Conv2D(32, 3, activation="relu")(inputs)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(64, 3, activation="relu")(x)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dropout(0.5)(x)
    outputs = keras.layers.Dense(10, activation="softmax")(x)
    convnet = os.path.join(folder, "convnet.keras")
    keras.Model(inputs, outputs, name="convnet").save(convnet)
    mobile = os.path.join(folder, "mobilenet_v2.keras")
    keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3), classes=10).save(mobile)
    return [convnet, mobile]


def _plan(source: list[str], extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "ralp.planner", *source, "--batch-size", str(BATCH),
           "--devices", *DEVICES, "--bandwidth", *BANDWIDTHS, "--format", "json", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def _best(plan: dict) -> dict[str, tuple[str, bool]]:
    """Per setting: the best mode, and whether the plan called it a close call."""
    return {f"N={b.get('devices')} {b.get('bandwidth', b.get('bandwidth_bits'))}":
            (b["mode"], bool(b.get("close_call"))) for b in plan["best"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output")
    parser.add_argument("--models", nargs="*", help="zoo models (default: the zoo)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        sources = [["--model", m, "--image-size", str(IMAGE)] for m in (args.models or ZOO)]
        sources += [["--keras-model", path] for path in _outside_models(folder)]
        for source in sources:
            cal = os.path.join(folder, "cal.json")
            if os.path.exists(cal):
                os.remove(cal)
            uncalibrated = _best(_plan(source, []))
            done = subprocess.run([sys.executable, "-m", "ralp.planner", "--calibrate", *source,
                                   "--batch-size", str(BATCH), "--output", cal],
                                  capture_output=True, text=True, timeout=900)
            if done.returncode:
                raise SystemExit(f"calibrating {source} failed: {done.stderr[-2000:]}")
            calibrated = _best(_plan(source, ["--compute-profile", cal]))
            for setting, (mode, close) in uncalibrated.items():
                other, other_close = calibrated.get(setting, (None, False))
                rows.append({"model": source[1], "setting": setting, "uncalibrated": mode,
                             "calibrated": other, "same": mode == other,
                             "close_call": close or other_close})
                print(f"{os.path.basename(source[1]):>18} {setting:>22}: uncalibrated "
                      f"{mode:>10}, calibrated {other!s:>10}"
                      + ("  (close call)" if close or other_close else ""), flush=True)
    same = sum(r["same"] for r in rows)
    said = sum(1 for r in rows if not r["same"] and r["close_call"])
    print(f"same best mode in {same} of {len(rows)} settings; of the {len(rows) - same} that "
          f"differ, {said} called a close call")
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"command": "python " + " ".join(sys.argv), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
