#!/usr/bin/env bash
# Calibrate every workload of the recorded netns runs on this host (issue 14), for the
# simulated cluster (--shared-host: each workload's compute, a transfer's cost, and the
# host's capacity for it, measured with processes timing one window together). Run it on
# a quiet machine, nothing else heavy running:
#   benchmarks/plan_calibrate.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-benchmarks/results/plan_calibration.json}
NEW=$(mktemp --suffix=.json)
rm -f "$NEW"
for workload in "vgg11 8 75" "alexnet 8 75" "overfeat 8 75" "resnet50 8 75" "inception3 8 75" \
                "vgg11 4 224" "vgg11 8 64" "resnet50 8 32"; do
    set -- $workload
    $PY -m ralp.planner --calibrate --shared-host --model "$1" --batch-size "$2" --image-size "$3" \
        --output "$NEW"
done
mv "$NEW" "$OUT"
