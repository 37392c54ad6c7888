#!/usr/bin/env bash
# The planner's validation against every recorded solo netns run (issue 14).
# 1. Calibrate (this host, shared: the simulated cluster's tasks share its cores), on a quiet
#    machine: benchmarks/plan_calibrate.sh (every workload below).
# 2. Predict every record, as calibrated and with the host capacity fitted on half.
# 3. Predict the records calibrated beside their runs on their own.
# 4. The spread of repeated settings (benchmarks/record_spread.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
R=benchmarks/results
FILES="$R/bench_sweep_1gbit.json $R/bench_sweep_10gbit.json $R/bench_horovod_1gbit.json
       $R/bench_horovod_10gbit.json $R/bench_vgg11_target.json $R/main_job.json
       $R/bench_stanza_1gbit.json $R/bench_stanza_10gbit.json $R/main_job_with_stanza.json"
# Records that carry their own calibration (python -m ralp.bench --calibrate, the
# plan-steady, plan-steady8 and plan-stanza parts of run_bench_recorded.sh) are predicted
# from it; the rest from CAL.
STEADY="$R/bench_plan_steady_1gbit.json $R/bench_plan_steady_10gbit.json
        $R/bench_plan_stanza_1gbit.json $R/bench_plan_stanza_10gbit.json
        $R/bench_plan_steady8_10gbit.json"
FILES="$FILES $STEADY"
CAL=$R/plan_calibration.json
$PY -m ralp.planner --validate $FILES --compute-profile $CAL > $R/plan_validation.txt
$PY -m ralp.planner --validate $FILES --compute-profile $CAL --format json > $R/plan_validation.json
$PY -m ralp.planner --validate $FILES --compute-profile $CAL --fit-half > $R/plan_validation_fit_half.txt
$PY -m ralp.planner --validate $FILES --compute-profile $CAL --fit-half --format json \
    > $R/plan_validation_fit_half.json
# 3. the records calibrated beside their runs alone (no --compute-profile needed)
$PY -m ralp.planner --validate $STEADY > $R/plan_validation_calibrated.txt
$PY -m ralp.planner --validate $STEADY --format json > $R/plan_validation_calibrated.json
$PY -m ralp.planner --validate $STEADY --fit-half > $R/plan_validation_calibrated_fit_half.txt
$PY -m ralp.planner --validate $STEADY --fit-half --format json \
    > $R/plan_validation_calibrated_fit_half.json
# 4. how far apart the records of one setting are, and what that allows any predictor
$PY benchmarks/record_spread.py $FILES > $R/record_spread.txt
