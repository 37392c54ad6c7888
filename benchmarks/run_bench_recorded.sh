#!/usr/bin/env bash
# The recorded bench results (issues 4 and 5): every command that produced
# benchmarks/results/bench_*. Needs root (netns backend) and Horovod (./scripts/setup.sh).
# On a 2-core machine this takes about 110 minutes in all. --steps and --warmup count per worker.
# Usage: benchmarks/run_bench_recorded.sh [target|22k|consolidation|sweep-1gbit|sweep-10gbit|
#                                          horovod-1gbit|horovod-10gbit|sync|sync-3w|
#                                          pulls-250mbit|pulls-1gbit|pulls-10gbit|
#                                          pull-timeline|dssp-table1|stanza-1gbit|
#                                          stanza-10gbit|stanza-bytes|stanza-digits|
#                                          auto-vs-best|plan-steady-1gbit|
#                                          plan-steady-10gbit|plan-stanza-1gbit|
#                                          plan-stanza-10gbit|plan-steady8-10gbit|
#                                          plan-steady8-1gbit|device-compute|
#                                          devices-repeat-1gbit|devices-repeat-10gbit|
#                                          devices-repeat-10gbit-paced|devices-repeat-10gbit-long|
#                                          devices-headline|devices-zoo-1gbit|
#                                          devices-zoo-1gbit-shared|ring-wire|
#                                          devices-zoo-1gbit-shared-fc|
#                                          devices-zoo-1gbit-one-ps|
#                                          devices-zoo-1gbit-again|
#                                          devices-zoo-n8-1gbit|
#                                          devices-zoo-n8-1gbit-shared|
#                                          devices-zoo-500mbit|devices-zoo-n8-500mbit|
#                                          devices-zoo-500mbit-shared|devices-zoo-n8-500mbit-shared|
#                                          devices-zoo-n8-500mbit-shared-again|
#                                          heldout-n6|host-pace|cfs-period|collective-1gbit|
#                                          collective-10gbit|collective-n8-1gbit|
#                                          collective-n8-10gbit|ring-overlap|
#                                          ring-overlap-curve|link-duplex|
#                                          budgeted-validations|transfer-cpu|
#                                          fabric-transfer|fabric-concurrency|
#                                          step-timeline|step-timeline-alexnet|
#                                          devices-zoo-n8-500mbit-in-epoch|
#                                          devices-zoo-n4-1gbit-in-epoch|
#                                          devices-zoo-n4-500mbit-in-epoch|
#                                          devices-zoo-n8-1gbit-in-epoch|
#                                          step-timeline-ralp|devices-n4-1gbit-steady|
#                                          devices-n2-alone-1gbit|
#                                          devices-n4-1gbit-steady-rest|
#                                          devices-n8-500mbit-steady|
#                                          devices-n4-500mbit-steady|
#                                          devices-n8-500mbit-inception3-steady|
#                                          devices-two-workers-1gbit|
#                                          devices-two-workers-resnet50-1gbit|
#                                          devices-two-workers-overfeat-1gbit|
#                                          heldout-n6-steady-predict|heldout-n6-steady|
#                                          heldout-n6-steady-all|
#                                          turns-one-ps-resnet50-500mbit|
#                                          turns-one-ps-resnet50-750mbit|chaos-all]...
# (default: all, in that order)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}  # another checkout's venv works too (PY=/path/.venv/bin/python)
R=benchmarks/results
mkdir -p "$R"
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(target 22k consolidation sweep-1gbit sweep-10gbit horovod-1gbit horovod-10gbit sync sync-3w pulls-250mbit pulls-1gbit pulls-10gbit pull-timeline dssp-table1 stanza-1gbit stanza-10gbit stanza-bytes stanza-digits auto-vs-best plan-steady-1gbit plan-steady-10gbit plan-stanza-10gbit plan-stanza-1gbit plan-steady8-10gbit plan-steady8-1gbit)

# Every budgeted validation, from the committed records and calibrations (no run): after a
# change to the planner's model, part budgeted-validations brings them up to date.
budgeted_validations() {
  # Windows inside an epoch's first cycles (a few warm-up steps) are validated with the model
  # of that regime (plain PS's workers in step); windows past them (16 warm-up steps: the
  # *_steady files) and one worker alone with the default, which auto and wrap use
  local FIRST=(--step-model in-step)
  $PY -m ralp.planner "${FIRST[@]}" --validate $R/devices_zoo_1gbit.json > $R/devices_zoo_1gbit_validation.txt
  $PY -m ralp.planner "${FIRST[@]}" --validate $R/devices_zoo_1gbit.json --format json \
    > $R/devices_zoo_1gbit_validation.json
  $PY -m ralp.planner "${FIRST[@]}" --validate $R/devices_zoo_1gbit.json --overlap-from \
    $R/ring_overlap_curve_n4.json > $R/devices_zoo_1gbit_validation_curve.txt
  $PY -m ralp.planner "${FIRST[@]}" --validate $R/devices_zoo_1gbit.json --overlap-from \
    $R/ring_wire_n4.json > $R/devices_zoo_1gbit_validation_wire.txt
  $PY -m ralp.planner "${FIRST[@]}" --validate $R/devices_zoo_1gbit.json --overlap-from \
    $R/ring_wire_n4.json --format json > $R/devices_zoo_1gbit_validation_wire.json
  $PY -m ralp.planner "${FIRST[@]}" --validate $R/devices_zoo_1gbit_one_ps.json \
    > $R/devices_zoo_1gbit_one_ps_validation.txt
  $PY -m ralp.planner "${FIRST[@]}" --validate $R/devices_zoo_1gbit_one_ps.json --overlap-from \
    $R/ring_wire_n4.json > $R/devices_zoo_1gbit_one_ps_validation_wire.txt
  $PY -m ralp.planner "${FIRST[@]}" --validate $R/devices_zoo_n8_1gbit.json \
    > $R/devices_zoo_n8_1gbit_validation.txt
  for name in devices_zoo_1gbit_again devices_zoo_500mbit devices_zoo_n8_500mbit; do
    $PY -m ralp.planner "${FIRST[@]}" --validate $R/$name.json > $R/${name}_validation.txt
  done
  # issue 25 (b)'s sweep (N = 4 and 8 at 1 Gbit/s and 500 Mbit/s), own calibrations; and
  # with gRPC's CPU on the fabric lent (fabric-transfer), which the first three's
  # calibrations predate
  sweep=($R/devices_zoo_1gbit_again.json $R/devices_zoo_n8_1gbit.json $R/devices_zoo_500mbit.json
         $R/devices_zoo_n8_500mbit.json)
  fabric=($R/fabric_transfer_n4_calibration.json $R/fabric_transfer_n8_calibration.json)
  $PY -m ralp.planner "${FIRST[@]}" --validate "${sweep[@]}" > $R/devices_sweep_validation.txt
  $PY -m ralp.planner "${FIRST[@]}" --validate "${sweep[@]}" --overlap-from "${fabric[@]}" \
    > $R/devices_sweep_validation_fabric.txt
  $PY -m ralp.planner "${FIRST[@]}" --validate "${sweep[@]}" --overlap-from "${fabric[@]}" --format json \
    > $R/devices_sweep_validation_fabric.json
  $PY -m ralp.planner --validate "${sweep[@]}" --overlap-from "${fabric[@]}" \
    --step-model queue > $R/devices_sweep_validation_fabric_queue.txt
  # the PS modes measured inside the epoch, and the queueing network alone (the planner's PS
  # modes before the layer pipeline) beside the default
  for name in devices_zoo_n8_500mbit_in_epoch devices_zoo_n4_1gbit_in_epoch \
              devices_zoo_n4_500mbit_in_epoch; do
    $PY -m ralp.planner "${FIRST[@]}" --validate $R/$name.json > $R/${name}_validation.txt
    $PY -m ralp.planner --validate $R/$name.json --step-model queue \
      > $R/${name}_validation_queue.txt
  done
  # each round from its own calibration against every round from the first (issue 26)
  $PY benchmarks/calibration_rounds.py $R/devices_zoo_n4_1gbit_in_epoch.json \
    > $R/devices_zoo_n4_1gbit_in_epoch_calibration_rounds.txt
  # the window past the epoch's first cycles
  $PY -m ralp.planner --validate $R/devices_n4_1gbit_steady.json \
    > $R/devices_n4_1gbit_steady_validation.txt
  $PY -m ralp.planner --validate $R/devices_n4_1gbit_steady.json --step-model queue \
    > $R/devices_n4_1gbit_steady_validation_queue.txt
  # the zoo past the first cycles (the other two models measured after the pipeline's
  # change), and one worker and one PS task alone
  $PY -m ralp.planner --validate $R/devices_n4_1gbit_steady.json \
    $R/devices_n4_1gbit_steady_rest.json > $R/devices_n4_1gbit_steady_zoo_validation.txt
  $PY -m ralp.planner --validate $R/devices_n4_1gbit_steady.json \
    $R/devices_n4_1gbit_steady_rest.json --step-model queue \
    > $R/devices_n4_1gbit_steady_zoo_validation_queue.txt
  $PY -m ralp.planner --validate $R/devices_n2_alone_1gbit.json \
    > $R/devices_n2_alone_1gbit_validation.txt
  # every window past the epoch's first cycles, one validation; and with the first cycles'
  # model (the default before workers past them took turns or met at random)
  steady=($R/devices_n4_1gbit_steady.json $R/devices_n4_1gbit_steady_rest.json
          $R/devices_n4_500mbit_steady.json $R/devices_n8_500mbit_steady.json
          $R/devices_n8_500mbit_inception3_steady.json
          $R/devices_two_workers_resnet50_1gbit.json $R/devices_two_workers_overfeat_1gbit.json
          $R/heldout_vgg11_n6_all.json $R/turns_one_ps_resnet50_500mbit.json
          $R/turns_one_ps_resnet50_750mbit.json)
  # these files' records carry no calibration: each takes the one calibrated beside its runs
  local DAY=(--compute-profile-for $R/heldout_vgg11_n6_all.json=$R/heldout_vgg11_n6_all_calibration.json
             --compute-profile-for $R/turns_one_ps_resnet50_500mbit.json=$R/turns_one_ps_resnet50_calibration.json
             --compute-profile-for $R/turns_one_ps_resnet50_750mbit.json=$R/turns_one_ps_resnet50_750mbit_calibration.json)
  $PY -m ralp.planner --validate "${steady[@]}" "${DAY[@]}" > $R/devices_steady_validation.txt
  $PY -m ralp.planner "${FIRST[@]}" --validate "${steady[@]}" "${DAY[@]}" \
    > $R/devices_steady_validation_in_step.txt
  $PY -m ralp.planner --validate $R/devices_two_workers_1gbit.json \
    > $R/devices_two_workers_1gbit_validation.txt
  # each steady file alone, as its part writes it
  local f
  for f in devices_two_workers_resnet50_1gbit devices_two_workers_overfeat_1gbit \
           devices_n4_500mbit_steady devices_n8_500mbit_steady devices_n8_500mbit_inception3_steady; do
    $PY -m ralp.planner --validate $R/$f.json > $R/${f}_validation.txt
  done
  $PY -m ralp.planner --validate $R/heldout_vgg11_n6_all.json \
    --compute-profile $R/heldout_vgg11_n6_all_calibration.json \
    > $R/heldout_vgg11_n6_all_validation.txt
  $PY -m ralp.planner --validate $R/turns_one_ps_resnet50_500mbit.json \
    --compute-profile $R/turns_one_ps_resnet50_calibration.json \
    > $R/turns_one_ps_resnet50_500mbit_validation.txt
  $PY -m ralp.planner --validate $R/turns_one_ps_resnet50_750mbit.json \
    --compute-profile $R/turns_one_ps_resnet50_750mbit_calibration.json \
    > $R/turns_one_ps_resnet50_750mbit_validation.txt
  $PY -m ralp.planner --validate $R/heldout_vgg11_n6.json > $R/heldout_vgg11_n6_validation.txt
  # the sweep's windows inside the epoch with the default model past it
  $PY -m ralp.planner --validate "${sweep[@]}" --overlap-from "${fabric[@]}" \
    > $R/devices_sweep_validation_fabric_steady.txt
  $PY -m ralp.planner --validate $R/devices_n2_alone_1gbit.json --step-model queue \
    > $R/devices_n2_alone_1gbit_validation_queue.txt
  # a worker's CPU while its link receives and while it sends, from the step timelines
  $PY benchmarks/step_phases.py $R/step_timeline_*.json > $R/step_phases.txt
  # every worker's pipeline at once, links shared fairly or first come first served
  wf=$R/workers_fluid_n4_1gbit_steady
  $PY benchmarks/workers_fluid.py $R/devices_n4_1gbit_steady.json > $wf.txt
  $PY benchmarks/workers_fluid.py $R/devices_n4_1gbit_steady.json --offset 1 > ${wf}_offset1.txt
  $PY benchmarks/workers_fluid.py $R/devices_n4_1gbit_steady.json --offset 1 --compute-scale 1.6 \
    > ${wf}_offset1_compute1.6.txt
  $PY -m ralp.planner "${FIRST[@]}" --validate $R/heldout_alexnet_n6.json --compute-profile \
    $R/heldout_alexnet_n6_calibration.json --overlap-from $R/ring_wire_n6.json \
    > $R/heldout_alexnet_n6_validation_wire.txt
  for bw in 1gbit 10gbit; do
    $PY -m ralp.planner "${FIRST[@]}" --validate $R/collective_n8_$bw.json --overlap-from \
      $R/ring_overlap_n8.json > $R/collective_n8_${bw}_validation.txt
    $PY -m ralp.planner "${FIRST[@]}" --validate $R/collective_n8_$bw.json --overlap-from \
      $R/ring_overlap_curve_n8.json > $R/collective_n8_${bw}_validation_curve.txt
    $PY -m ralp.planner "${FIRST[@]}" --validate $R/collective_n8_$bw.json --overlap-from \
      $R/ring_wire_n8.json > $R/collective_n8_${bw}_validation_wire.txt
  done
}

# The zoo on N budgeted devices at one link rate, 3 interleaved rounds, each workload
# calibrated inside one device's budget first, validated from its own calibrations:
# calibrated_zoo N RATE NAME
calibrated_zoo() {
  $PY -m ralp.bench --backend netns --bandwidth $2 \
    --models vgg11 alexnet overfeat resnet50 inception3 --image-size 75 --batch-size 8 \
    --modes ps ralp-h ralp-n horovod stanza --devices $1 --steps 6 --warmup 1 \
    --repeat 3 --calibrate --quiet --out $R/$3.json --plot $R/$3.png || true
  $PY -m ralp.planner --validate $R/$3.json > $R/$3_validation.txt
}

# The PS modes of that zoo again, each window inside its warm-up's epoch (3 warm-up steps
# per worker, one more after): ps_zoo_in_epoch N RATE NAME
ps_zoo_in_epoch() {
  $PY -m ralp.bench --backend netns --bandwidth $2 \
    --models vgg11 alexnet overfeat resnet50 inception3 --image-size 75 --batch-size 8 \
    --modes ps ralp-h ralp-n --devices $1 --steps 6 --warmup 3 \
    --repeat 3 --calibrate --quiet --out $R/$3.json --plot $R/$3.png || true
  $PY -m ralp.planner --validate $R/$3.json > $R/$3_validation.txt
}

# The same zoo on shared CPUs (no budgets, no calibration), to set beside it:
# shared_zoo N RATE NAME
shared_zoo() {
  $PY -m ralp.bench --backend netns --bandwidth $2 \
    --models vgg11 alexnet overfeat resnet50 inception3 --image-size 75 --batch-size 8 \
    --modes ps ralp-h ralp-n horovod stanza --devices $1 --steps 6 --warmup 1 \
    --device-cpus shared --repeat 3 --quiet --out $R/$3.json --plot $R/$3.png || true
}

for part in "${parts[@]}"; do
  case "$part" in
  device-compute)  # issue 25: one budgeted device's step, and the link rates for the papers'
    # 50-90% network share of a plain PS step (how the zoo's link rates were chosen)
    $PY benchmarks/device_compute.py --models vgg11 alexnet overfeat resnet50 inception3 \
      --devices 4 8 --image-size 75 --batch-size 8 --out $R/device_compute.json ;;
  devices-repeat-1gbit|devices-repeat-10gbit)  # issue 25 (a): repeatability, budgeted
    # devices beside shared CPUs, 5 interleaved rounds
    bw=${part#devices-repeat-}
    $PY -m ralp.bench --backend netns --bandwidth $bw --models alexnet vgg11 --image-size 75 \
      --batch-size 8 --modes ps ralp-n horovod stanza --devices 4 --steps 20 \
      --device-cpus auto shared --repeat 5 --quiet \
      --out $R/devices_repeat_$bw.json --plot $R/devices_repeat_$bw.png || true ;;
  devices-repeat-10gbit-paced)  # issue 25 (a): paced budgets (--device-cpus paced) beside
    # the plain budget, 5 interleaved rounds: does holding the compute pace tighten the spread?
    $PY -m ralp.bench --backend netns --bandwidth 10gbit --models alexnet vgg11 --image-size 75 \
      --batch-size 8 --modes ps ralp-n horovod stanza --devices 4 --steps 20 \
      --device-cpus auto paced --repeat 5 --quiet \
      --out $R/devices_repeat_10gbit_paced.json --plot $R/devices_repeat_10gbit_paced.png || true ;;
  devices-repeat-10gbit-long)  # issue 25 (a): the same 10 Gbit/s setting with windows 3x as
    # long (60 measured steps per worker): the host's pace averages out over 30 s windows
    $PY -m ralp.bench --backend netns --bandwidth 10gbit --models alexnet --image-size 75 \
      --batch-size 8 --modes ps ralp-n horovod stanza --devices 4 --steps 60 --repeat 5 \
      --quiet --out $R/devices_repeat_10gbit_long.json --plot $R/devices_repeat_10gbit_long.png \
      || true
    $PY -m ralp.bench --backend netns --bandwidth 10gbit --models vgg11 --image-size 75 \
      --batch-size 8 --modes ps ralp-n horovod stanza --devices 4 --steps 60 --repeat 5 \
      --quiet --out $R/devices_repeat_10gbit_long_vgg11.json \
      --plot $R/devices_repeat_10gbit_long_vgg11.png || true ;;
  devices-headline)  # issue 25: vgg11 at its benchmark size, N = 4, budgeted, at a rate that
    # gives plain PS a network share inside the papers' 50-90% (benchmarks/device_compute.py)
    $PY -m ralp.bench --backend netns --bandwidth 250mbit --models vgg11 --batch-size 8 \
      --modes ps ralp-n --devices 4 --steps 5 --repeat 3 --quiet \
      --out $R/devices_headline_vgg11.json --plot $R/devices_headline_vgg11.png || true ;;
  devices-zoo-1gbit)  # issue 25 (b), the part that was run: the zoo on budgeted devices,
    # N = 4, 3 interleaved rounds, each workload calibrated inside one device's budget first.
    # 1 Gbit/s gives plain PS a 61-86% network share on every zoo model (device-compute)
    $PY -m ralp.bench --backend netns --bandwidth 1gbit \
      --models vgg11 alexnet overfeat resnet50 inception3 --image-size 75 --batch-size 8 \
      --modes ps ralp-h ralp-n horovod stanza --devices 4 --steps 6 --warmup 1 \
      --repeat 3 --calibrate --quiet \
      --out $R/devices_zoo_1gbit.json --plot $R/devices_zoo_1gbit.png || true ;;
  collective-1gbit|collective-10gbit)  # issue 28: TensorFlow's own allreduce beside Horovod,
    # plain PS and RALP-N on budgeted devices, N = 4, 3 interleaved rounds
    bw=${part#collective-}
    $PY -m ralp.bench --backend netns --bandwidth $bw --models alexnet vgg11 resnet50 \
      --image-size 75 --batch-size 8 --modes ps ralp-n horovod collective --devices 4 \
      --steps 10 --repeat 3 --quiet --out $R/collective_$bw.json --plot $R/collective_$bw.png \
      || true ;;
  collective-n8-1gbit|collective-n8-10gbit)  # issue 28: the same at N = 8 (0.2 CPU per device),
    # each workload calibrated inside one device's budget first (the planner's validation)
    bw=${part#collective-n8-}
    $PY -m ralp.bench --backend netns --bandwidth $bw --models alexnet vgg11 resnet50 \
      --image-size 75 --batch-size 8 --modes ps ralp-n horovod collective --devices 8 \
      --steps 10 --repeat 3 --calibrate --quiet --out $R/collective_n8_$bw.json \
      --plot $R/collective_n8_$bw.png || true ;;
  ring-overlap)  # issue 26: each ring's overlap of wire and CPU on a budgeted device (N = 4:
    # 0.425 CPU, N = 8: 0.212), in a calibration each; then the budgeted records validated: the
    # zoo's from the calibrations its records carry (overlaps measured beside the runs), the
    # collective runs' with these overlaps (their calibrations predate them)
    for n in 4 8; do
      $PY -m ralp.planner --calibrate --model alexnet --batch-size 8 --image-size 75 \
        --device-cpus auto --devices $n --output $R/ring_overlap_n$n.json
    done
    budgeted_validations ;;
  ring-overlap-curve)  # issue 26, an experiment: the overlaps at wire/CPU ratios 1/3, 1 and 3,
    # and the same validations reading them at each phase's own ratio
    for n in 4 8; do
      $PY -m ralp.planner --calibrate --model alexnet --batch-size 8 --image-size 75 \
        --device-cpus auto --devices $n --overlap-ratios 0.3333 1 3 \
        --output $R/ring_overlap_curve_n$n.json
    done
    budgeted_validations ;;
  ring-wire)  # issue 26: each ring's wire factor and overlap, measured together (N = 4, 6
    # and 8 budgets), and the budgeted records validated with them (the records' own
    # calibrations predate the wire factor: their overlaps were found against a factor of 1)
    for n in 4 6 8; do
      $PY -m ralp.planner --calibrate --model alexnet --batch-size 8 --image-size 75 \
        --device-cpus auto --devices $n --output $R/ring_wire_n$n.json
    done
    budgeted_validations ;;
  link-duplex)  # issue 26: does a shaped link carry a pull and a push at once (the PS link
    # model's two directions)? One worker, one PS, 64 MB each way, 5 interleaved repeats
    $PY benchmarks/link_duplex.py --bandwidth 250mbit 1gbit 10gbit \
      --out $R/link_duplex.json ;;
  transfer-cpu)  # issue 26: a gRPC transfer's CPU per byte on the fabric (plain PS records'
    # task counters and link bytes) beside the calibration's loopback figure; nothing run
    $PY benchmarks/transfer_cpu.py $R/devices_zoo_1gbit.json $R/devices_zoo_1gbit_again.json \
      $R/devices_zoo_1gbit_one_ps.json $R/devices_zoo_n8_1gbit.json $R/devices_zoo_500mbit.json \
      $R/collective_n8_1gbit.json $R/collective_n8_10gbit.json \
      --out $R/transfer_cpu.json > $R/transfer_cpu.txt ;;
  budgeted-validations)  # issue 26: every budgeted validation again, nothing run
    budgeted_validations ;;
  chaos-all)  # issue 29: every mode through its kills (PS modes: worker 1 at step 100 and the
    # PS at 200; horovod and collective: rank 1 at 150; stanza: its FC rank at 100 and CONV
    # rank 1 at 200), restarted from checkpoints every 50 steps, against failure-free runs
    $PY -m lab.studies.chaos --modes ralp ps horovod stanza collective --steps 300 \
      --checkpoint-every 50 --repeats 3 --out $R/chaos_all.json || true ;;
  host-pace)  # issue 25 (a): the idle host's pace second by second (two minutes), and whether
    # other devices' network work is charged to a budgeted device (this kernel has no IRQ time
    # accounting); benchmarks/pace_spread.py then reads the pace in devices-repeat-10gbit
    $PY -m ralp.emulation.pace --seconds 120 --out $R/host_pace_idle.json
    $PY benchmarks/softirq_charge.py --rates 1gbit 10gbit --cpus 0.425 --seconds 8 --rounds 3 \
      --out $R/softirq_charge.json
    $PY benchmarks/pace_spread.py $R/devices_repeat_10gbit.json > $R/devices_repeat_10gbit_pace.txt ;;
  cfs-period)  # issue 25: does a shorter CFS period make 10 Gbit/s budgeted runs repeat
    # better? 5 rounds, 10 ms and 2.5 ms interleaved (the order swapped every other round)
    rm -f $R/cfs_period_round*.json
    for round in 1 2 3 4 5; do
      order="10000 2500"; [ $((round % 2)) -eq 0 ] && order="2500 10000"
      for p in $order; do
        $PY benchmarks/cfs_period.py $p --backend netns --bandwidth 10gbit --models alexnet \
          --image-size 75 --batch-size 8 --modes ps ralp-n horovod stanza --devices 4 \
          --steps 20 --quiet --out $R/cfs_period_round${round}_p$p.json || true
      done
    done
    $PY -c "import glob, json; json.dump([dict(r, round=int(f.split('round')[1][0]) - 1)
      for f in sorted(glob.glob('$R/cfs_period_round*_p*.json')) for r in json.load(open(f))],
      open('$R/cfs_period_10gbit.json', 'w'), indent=1)"
    rm -f $R/cfs_period_round*.json $R/cfs_period_round*.csv ;;
  heldout-n6)  # issue 26: a setting no record covers, predicted before it was measured:
    # alexnet on N = 6 budgeted devices (0.283 CPU each) at 2.5 Gbit/s
    $PY -m ralp.planner --calibrate --model alexnet --batch-size 8 --image-size 75 \
      --device-cpus auto --devices 6 --output $R/heldout_alexnet_n6_calibration.json
    $PY -m ralp.planner --model alexnet --batch-size 8 --image-size 75 --devices 6 \
      --bandwidth 2500mbit --compute-profile $R/heldout_alexnet_n6_calibration.json \
      --csv $R/heldout_alexnet_n6_prediction.csv
    $PY -m ralp.bench --backend netns --bandwidth 2500mbit --models alexnet --image-size 75 \
      --batch-size 8 --modes ps ralp-n horovod stanza --devices 6 --steps 10 --repeat 3 \
      --quiet --out $R/heldout_alexnet_n6.json --plot $R/heldout_alexnet_n6.png || true ;;
  heldout-n6-steady-predict)  # issue 26: a second held-out setting, for the model past the
    # first cycles: vgg11 on N = 6 budgeted devices (0.283 CPU each) at 750 Mbit/s, predicted
    # (and committed) before part heldout-n6-steady measures it
    $PY -m ralp.planner --calibrate --model vgg11 --batch-size 8 --image-size 75 \
      --device-cpus auto --devices 6 --transfer-rates 750mbit \
      --output $R/heldout_vgg11_n6_calibration.json
    $PY -m ralp.planner --model vgg11 --batch-size 8 --image-size 75 --devices 6 \
      --bandwidth 750mbit --compute-profile $R/heldout_vgg11_n6_calibration.json \
      --csv $R/heldout_vgg11_n6_prediction.csv | tee $R/heldout_vgg11_n6_prediction.txt ;;
  heldout-n6-steady)  # the same setting measured past the first cycles, each round calibrated
    $PY -m ralp.bench --backend netns --bandwidth 750mbit --models vgg11 --image-size 75 \
      --batch-size 8 --modes ps ralp-n --devices 6 --device-cpus 0.283 --steps 12 \
      --warmup 16 --repeat 3 --calibrate --quiet --out $R/heldout_vgg11_n6.json \
      --plot $R/heldout_vgg11_n6.png || true
    $PY -m ralp.planner --validate $R/heldout_vgg11_n6.json > $R/heldout_vgg11_n6_validation.txt ;;
  heldout-n6-steady-all)  # the held-out setting in every mode the prediction ranks (it named
    # Stanza best), 3 interleaved rounds; predicted from the calibration committed before (a
    # day earlier) and from one taken right after the runs, on their day
    $PY -m ralp.bench --backend netns --bandwidth 750mbit --models vgg11 --image-size 75 \
      --batch-size 8 --modes ps ralp-n horovod stanza --devices 6 --device-cpus 0.283 \
      --steps 12 --warmup 16 --repeat 3 --quiet --out $R/heldout_vgg11_n6_all.json \
      --plot $R/heldout_vgg11_n6_all.png || true
    $PY -m ralp.planner --validate $R/heldout_vgg11_n6_all.json \
      --compute-profile $R/heldout_vgg11_n6_calibration.json \
      > $R/heldout_vgg11_n6_all_validation_previous_day.txt
    $PY -m ralp.planner --calibrate --model vgg11 --batch-size 8 --image-size 75 \
      --device-cpus auto --devices 6 --transfer-rates 750mbit \
      --output $R/heldout_vgg11_n6_all_calibration.json
    $PY -m ralp.planner --validate $R/heldout_vgg11_n6_all.json \
      --compute-profile $R/heldout_vgg11_n6_all_calibration.json \
      > $R/heldout_vgg11_n6_all_validation.txt ;;
  devices-zoo-1gbit-shared)  # issue 25 (b): the conv-heavy half of the zoo above on shared
    # CPUs (no budgets), 3 interleaved rounds, to set beside the budgeted figures
    $PY -m ralp.bench --backend netns --bandwidth 1gbit --models resnet50 inception3 \
      --image-size 75 --batch-size 8 --modes ps ralp-h ralp-n horovod stanza --devices 4 \
      --steps 6 --warmup 1 --device-cpus shared --repeat 3 --quiet \
      --out $R/devices_zoo_1gbit_shared.json --plot $R/devices_zoo_1gbit_shared.png || true ;;
  devices-zoo-1gbit-shared-fc)  # issue 25 (b): the FC-heavy half of the zoo on shared CPUs,
    # as above, to set beside the budgeted figures
    $PY -m ralp.bench --backend netns --bandwidth 1gbit --models vgg11 alexnet overfeat \
      --image-size 75 --batch-size 8 --modes ps ralp-h ralp-n horovod stanza --devices 4 \
      --steps 6 --warmup 1 --device-cpus shared --repeat 3 --quiet \
      --out $R/devices_zoo_1gbit_shared_fc.json --plot $R/devices_zoo_1gbit_shared_fc.png || true ;;
  devices-zoo-1gbit-again)  # issue 26: the zoo of devices-zoo-1gbit on another day, each
    # workload calibrated with every term the planner has (Gloo's wire factor, a transfer's
    # CPU), so that the planner is validated from the records' own calibrations
    calibrated_zoo 4 1gbit devices_zoo_1gbit_again ;;
  devices-zoo-1gbit-one-ps)  # issue 26: wrap's default decision is made on the cluster it is
    # given; plain PS and RALP on one shape (3 workers + 1 PS, as benchmarks/decide_timing.py
    # decides), N = 4, 1 Gbit/s, budgeted, 3 interleaved rounds, each workload calibrated first
    $PY -m ralp.bench --backend netns --bandwidth 1gbit \
      --models vgg11 alexnet overfeat resnet50 inception3 --image-size 75 --batch-size 8 \
      --modes ps ralp-n --devices 4 --workers 3 --ps 1 --steps 6 --warmup 1 \
      --repeat 3 --calibrate --quiet \
      --out $R/devices_zoo_1gbit_one_ps.json --plot $R/devices_zoo_1gbit_one_ps.png || true ;;
  devices-zoo-n8-1gbit)  # issue 25 (b): the zoo of devices-zoo-1gbit-again at N = 8 (0.212 CPU
    # per device), same rate, 3 interleaved rounds, each workload calibrated inside one device's
    # budget first; validated from its own calibrations
    calibrated_zoo 8 1gbit devices_zoo_n8_1gbit ;;
  devices-zoo-n8-1gbit-shared)  # issue 25 (b): the zoo above on shared CPUs, to set beside it
    shared_zoo 8 1gbit devices_zoo_n8_1gbit_shared ;;
  devices-zoo-500mbit)  # issue 25 (b), the second link rate: plain PS's network share 76-93%
    # at N = 4 and 59-87% at N = 8 (device_compute.json), so that with 1 Gbit/s the zoo
    # brackets the papers' 50-90% from both sides; budgeted, calibrated, as at 1 Gbit/s
    calibrated_zoo 4 500mbit devices_zoo_500mbit ;;
  devices-zoo-n8-500mbit)  # issue 25 (b): the second link rate at N = 8
    calibrated_zoo 8 500mbit devices_zoo_n8_500mbit ;;
  fabric-transfer)  # issue 26: gRPC's CPU per byte on the fabric (the calibration's probe) at
    # the sweep's rates and 10 Gbit/s, on N = 4 and 8 budgets, beside the records' figures;
    # the budgeted validations lend it to the records whose calibrations predate it
    $PY benchmarks/fabric_transfer.py --rates 500mbit 1gbit 10gbit --devices 4 8 \
      --records $R/transfer_cpu.json --out $R/fabric_transfer.json > $R/fabric_transfer.txt
    budgeted_validations ;;
  devices-zoo-500mbit-shared)  # issue 25 (b): the second link rate on shared CPUs, N = 4
    shared_zoo 4 500mbit devices_zoo_500mbit_shared ;;
  devices-zoo-n8-500mbit-shared)  # issue 25 (b): the second link rate on shared CPUs, N = 8
    shared_zoo 8 500mbit devices_zoo_n8_500mbit_shared ;;
  devices-zoo-n8-500mbit-shared-again)  # the three models the part above left incomplete
    # (Stanza's exit race, since fixed; vgg11's last round cut), all five modes, 3 rounds
    $PY -m ralp.bench --backend netns --bandwidth 500mbit --models vgg11 overfeat inception3 \
      --image-size 75 --batch-size 8 --modes ps ralp-h ralp-n horovod stanza --devices 8 \
      --steps 6 --warmup 1 --device-cpus shared --repeat 3 --quiet \
      --out $R/devices_zoo_n8_500mbit_shared_again.json \
      --plot $R/devices_zoo_n8_500mbit_shared_again.png || true ;;
  target)  # vgg11 at full size, N=4, where plain PS is network-bound (targets 1-3)
    $PY -m ralp.bench --backend netns --bandwidth 250mbit --models vgg11 --batch-size 4 \
      --modes ps ralp-h ralp-n --devices 4 --steps 3 --warmup 1 --compute-reference --quiet \
      --out $R/bench_vgg11_target.json --plot $R/bench_vgg11_target.png ;;
  22k)  # ImageNet-22K classes enlarge the last FC layer
    $PY -m ralp.bench --backend netns --bandwidth 1gbit --models vgg11 --image-size 64 \
      --batch-size 8 --num-classes 21841 --modes ps ralp-h ralp-n --devices 4 --steps 4 \
      --compute-reference --quiet --out $R/bench_22k.json --plot $R/bench_22k.png ;;
  consolidation)  # 2 jobs of 4 devices over one shared 1gbit trunk
    for models in "vgg11" "resnet50" "vgg11 resnet50"; do
      tag=$(echo "$models" | tr ' ' '-')
      $PY -m ralp.bench --backend netns --bandwidth 1gbit --jobs 2 --models $models \
        --image-size 64 --batch-size 8 --steps 4 --quiet \
        --out $R/bench_consolidation_$tag.json
    done ;;
  sweep-1gbit|sweep-10gbit)  # five models scaled to 75 px, N = 4 and 8
    bw=${part#sweep-}
    $PY -m ralp.bench --backend netns --bandwidth $bw \
      --models vgg11 alexnet overfeat resnet50 inception3 --image-size 75 --batch-size 8 \
      --modes ps ralp-h ralp-n --devices 4 8 --steps 3 --quiet \
      --out $R/bench_sweep_$bw.json --plot $R/bench_sweep_$bw.png || true ;;
  horovod-1gbit|horovod-10gbit)  # RALP-N vs Horovod ring allreduce vs plain PS (issue 5)
    bw=${part#horovod-}
    $PY -m ralp.bench --backend netns --bandwidth $bw --models vgg11 alexnet resnet50 \
      --image-size 75 --batch-size 8 --modes ps ralp-n horovod --devices 4 8 --steps 3 --quiet \
      --out $R/bench_horovod_$bw.json --plot $R/bench_horovod_$bw.png || true ;;
  sync)  # issue 6: BSP / ASP / SSP / DSSP on real data, 4 workers, worker 0 about twice as slow
    # (a fixed 0.3 s after each of its ~0.3 s steps: the same handicap in every run)
    $PY -m lab.studies.sync_digits --syncs bsp asp ssp:3 ssp:9 ssp:15 dssp:3:15 \
      --workers 4 --slow-worker 0:+0.3 --steps 480 --target 0.9 \
      --out $R/sync_digits.json --plot $R/sync_digits.png ;;
  sync-3w)  # the same with 3 workers, worker 0 about three times as slow (0.4 s on ~0.2 s)
    $PY -m lab.studies.sync_digits --syncs bsp asp ssp:3 ssp:15 dssp:3:15 \
      --workers 3 --slow-worker 0:+0.4 --steps 360 --target 0.9 \
      --out $R/sync_digits_3w_3x.json --plot $R/sync_digits_3w_3x.png ;;
  pulls-250mbit|pulls-1gbit|pulls-10gbit)  # issue 16: default vs layer vs ibatch pulls, plain
    # PS, N = 4 (2 workers + 2 PS); 250 Mbit/s and 1 Gbit/s network-bound, 10 Gbit/s not
    bw=${part#pulls-}
    $PY -m ralp.bench --backend netns --bandwidth $bw --models vgg11 alexnet --image-size 75 \
      --batch-size 8 --modes ps --devices 4 --steps 4 --warmup 1 \
      --pull-schedule default layer ibatch --trace-pulls --compute-reference --quiet \
      --out $R/pulls_$bw.json --plot $R/pulls_$bw.png || true ;;
  pull-timeline)  # issue 16, item 2: when each pull arrives against each layer's first op
    for model in vgg11 alexnet; do
      image=$([ $model = vgg11 ] && echo 64 || echo 75)
      $PY benchmarks/pull_timeline.py --model $model --image-size $image --workers 2 --ps 2 \
        --bandwidth 1gbit --schedules default ibatch layer \
        --out $R/pull_timeline_${model}_1gbit.json --plot $R/pull_timeline_${model}_1gbit.png
    done ;;
  dssp-table1)  # issue 16: the structure of the DSSP paper's Table I: 2 workers + 1 PS, worker 1
    # about 2.5x slower (0.3 s after each of its ~0.2 s steps), lenet on digits, 3 seeds
    $PY -m lab.studies.sync_digits --syncs bsp asp ssp:3 ssp:6 ssp:15 dssp:3:15 \
      dssp-paper:3:15 --workers 2 --slow-worker 1:+0.3 --steps 400 --target 0.9 0.95 \
      --seeds 0 1 2 --out $R/dssp_table1.json --plot $R/dssp_table1.png ;;
  stanza-1gbit|stanza-10gbit)  # issue 13: layer separation beside ps, ralp-n and horovod
    # (one F=1 FC rank), five models at 75 px, N = 4 and 8; one bench call per model, so that
    # other work can take the machine between them
    bw=${part#stanza-}
    parts_dir=$(mktemp -d)
    for model in vgg11 alexnet overfeat resnet50 inception3; do
      $PY -m ralp.bench --backend netns --bandwidth $bw --models $model --image-size 75 \
        --batch-size 8 --modes ps ralp-n horovod stanza --devices 4 8 --steps 3 --quiet \
        --out "$parts_dir/$model.json" || true
    done
    $PY -m ralp.bench --show "$parts_dir"/{vgg11,alexnet,overfeat,resnet50,inception3}.json \
      --out $R/bench_stanza_$bw.json --plot $R/bench_stanza_$bw.png
    rm -rf "$parts_dir" ;;
  stanza-bytes)  # issue 13: the per-link byte model where the payload dominates Horovod's
    # control plane (lenet at batch 128: activations of 12.5 KB per sample), with 1 and 2 FC
    # ranks (the FC allreduce), N = 4 and 8
    parts_dir=$(mktemp -d)
    for fc in 1 2; do
      $PY -m ralp.bench --backend netns --bandwidth 1gbit --models lenet --batch-size 128 \
        --modes stanza --devices 4 8 --fc-workers $fc --steps 10 --quiet \
        --out "$parts_dir/f$fc.json" || true
    done
    $PY -m ralp.bench --show "$parts_dir"/f1.json "$parts_dir"/f2.json \
      --out $R/bench_stanza_bytes.json
    rm -rf "$parts_dir" ;;
  stanza-digits)  # issue 13: Stanza's accuracy experiment in structure, lenet on the digits
    $PY -m lab.studies.stanza_accuracy --workers 2 4 --bandwidth 1gbit --samples 19200 \
      --target 0.85 0.9 --out $R/stanza_digits.json --plot $R/stanza_digits.png
    # where plain PS is network-bound (250 Mbit/s), Stanza's synchronous step at W x the rate
    $PY -m lab.studies.stanza_accuracy --workers 2 4 --bandwidth 250mbit --samples 19200 \
      --target 0.85 0.9 --scale-lr --out $R/stanza_digits_250mbit.json \
      --plot $R/stanza_digits_250mbit.png
    # the same with the square-root rule (sqrt(W) x the rate) and Stanza's snapshots every
    # 5 steps, so both modes' curves are sampled about every 2 s
    $PY -m lab.studies.stanza_accuracy --workers 2 4 --bandwidth 250mbit --samples 19200 \
      --target 0.85 0.9 --lr-scaling sqrt --eval-steps 5 \
      --out $R/stanza_digits_250mbit_sqrt.json --plot $R/stanza_digits_250mbit_sqrt.png ;;
  auto-vs-best)  # issue 14, item 6: --modes auto where its pick is not in Stanza's sweeps (stanza
    # with F > 1), then auto against the best measured mode in every setting of both sweeps
    parts_dir=$(mktemp -d)
    for s in "1gbit resnet50 4" "10gbit resnet50 4" "10gbit resnet50 8" "10gbit inception3 4"; do
      set -- $s
      $PY -m ralp.bench --backend netns --bandwidth $1 --models $2 --image-size 75 \
        --batch-size 8 --modes auto --devices $3 --steps 3 --quiet \
        --compute-profile $R/plan_calibration.json --out "$parts_dir/$1-$2-$3.json" || true
    done
    $PY -m ralp.bench --show "$parts_dir"/*.json --out $R/bench_auto.json
    rm -rf "$parts_dir"
    $PY benchmarks/auto_vs_best.py $R/bench_stanza_1gbit.json $R/bench_stanza_10gbit.json \
      $R/bench_auto.json --compute-profile $R/plan_calibration.json --out $R/auto_vs_best.json ;;
  plan-steady-1gbit|plan-steady-10gbit|plan-steady8-1gbit|plan-steady8-10gbit)  # issue 14:
    # the planner's validation set, every model and mode at N = 4 (plan-steady) or N = 8
    # (plan-steady8, item 6's other cluster size), 10 steps per worker, each workload
    # calibrated just before its runs (--calibrate: the records carry it, with Stanza's phases
    # since ralp.planner.beside); one bench call per model (3-18 minutes each)
    name=${part%-*}  # plan-steady or plan-steady8
    bw=${part##*-}
    if [ "$name" = plan-steady8 ]; then devices=8; else devices=4; fi
    parts_dir=$(mktemp -d)
    for m in alexnet vgg11 resnet50 inception3 overfeat; do
      $PY -m ralp.bench --backend netns --bandwidth $bw --models $m --modes ps ralp-h ralp-n \
        horovod stanza --devices $devices --batch-size 8 --image-size 75 --steps 10 --warmup 2 \
        --calibrate --quiet --out "$parts_dir/$m.json" || true
    done
    $PY -m ralp.bench --show "$parts_dir"/*.json --out $R/bench_${name//-/_}_$bw.json
    rm -rf "$parts_dir" ;;
  plan-stanza-1gbit|plan-stanza-10gbit)  # issue 14: stanza alone, each workload calibrated
    # with Stanza's phases measured under Horovod (ralp.planner.beside) just before its run
    bw=${part#plan-stanza-}
    parts_dir=$(mktemp -d)
    for m in alexnet vgg11 resnet50 inception3 overfeat; do
      $PY -m ralp.bench --backend netns --bandwidth $bw --models $m --modes stanza \
        --devices 4 --batch-size 8 --image-size 75 --steps 10 --warmup 2 --calibrate --quiet \
        --out "$parts_dir/$m.json" || true
    done
    $PY -m ralp.bench --show "$parts_dir"/*.json --out $R/bench_plan_stanza_$bw.json
    rm -rf "$parts_dir" ;;
  fabric-concurrency)  # issue 26: k workers' transfers at once through one budgeted PS's link
    $PY benchmarks/fabric_concurrency.py --bandwidth 500mbit 1gbit --workers 1 2 4 7 \
      --out $R/fabric_concurrency.json > $R/fabric_concurrency.txt ;;
  step-timeline)  # issue 26: every task's link and CPU through a PS-mode window, the sweep's worst three
    for setting in "resnet50 ralp-n 8 500mbit 12" "overfeat ps 8 500mbit 16" "vgg11 ralp-h 4 1gbit 30"; do
      read -r model mode n rate steps <<< "$setting"
      name=$R/step_timeline_${model}_${mode/-/}_n${n}_${rate}
      $PY benchmarks/step_timeline.py --model "$model" --mode "$mode" --devices "$n" \
        --bandwidth "$rate" --steps "$steps" --out "$name.json" --plot "$name.png"
    done > $R/step_timeline.txt ;;
  step-timeline-alexnet)  # issue 26: plain PS on alexnet, N = 8, 500 Mbit/s: in step or not?
    name=$R/step_timeline_alexnet_ps_n8_500mbit
    $PY benchmarks/step_timeline.py --model alexnet --mode ps --devices 8 --bandwidth 500mbit \
      --steps 16 --out "$name.json" --plot "$name.png" > $R/step_timeline_alexnet.txt ;;
  devices-zoo-n8-500mbit-in-epoch)  # issue 26: the PS modes of devices-zoo-n8-500mbit again,
    # each window inside its warm-up's epoch
    ps_zoo_in_epoch 8 500mbit devices_zoo_n8_500mbit_in_epoch ;;
  devices-zoo-n4-1gbit-in-epoch|devices-zoo-n4-500mbit-in-epoch|devices-zoo-n8-1gbit-in-epoch)
    # issue 26: the rest of the sweep's PS modes (devices-zoo-1gbit-again, -500mbit,
    # -n8-1gbit) measured the same way
    nb=${part#devices-zoo-}; nb=${nb%-in-epoch}; n=${nb%%-*}; bw=${nb#*-}
    ps_zoo_in_epoch ${n#n} $bw devices_zoo_${n}_${bw}_in_epoch ;;
  step-timeline-ralp)  # issue 26: RALP-H on resnet50, N = 4, 1 Gbit/s, and plain PS beside it:
    # how long do the epoch's first cycles (workers in step) last?
    for mode in ralp-h ps; do
      name=$R/step_timeline_resnet50_${mode/-/}_n4_1gbit
      $PY benchmarks/step_timeline.py --model resnet50 --mode $mode --devices 4 --bandwidth 1gbit \
        --steps 12 --out "$name.json" --plot "$name.png"
    done > $R/step_timeline_ralp.txt ;;
  devices-n4-1gbit-steady)  # issue 26: the in-epoch setting of devices-zoo-n4-1gbit-in-epoch
    # with the window past the epoch's first cycles (16 steps of warm-up, 12 measured)
    $PY -m ralp.bench --backend netns --bandwidth 1gbit --models vgg11 resnet50 inception3 \
      --image-size 75 --batch-size 8 --modes ps ralp-h ralp-n --devices 4 --steps 12 \
      --warmup 16 --repeat 3 --calibrate --quiet --out $R/devices_n4_1gbit_steady.json \
      --plot $R/devices_n4_1gbit_steady.png || true
    $PY -m ralp.planner --validate $R/devices_n4_1gbit_steady.json \
      > $R/devices_n4_1gbit_steady_validation.txt ;;
  devices-n2-alone-1gbit)  # issue 26: one worker and one PS task, each on a device of the
    # N = 4 budget (0.425 CPU), after 8 warm-up steps: a worker's step alone on the fabric,
    # against the layer pipeline's step for one worker
    $PY -m ralp.bench --backend netns --bandwidth 1gbit --models vgg11 resnet50 \
      --image-size 75 --batch-size 8 --modes ps ralp-n --devices 2 --device-cpus 0.425 \
      --steps 8 --warmup 8 --repeat 3 --calibrate --quiet \
      --out $R/devices_n2_alone_1gbit.json || true
    $PY -m ralp.planner --validate $R/devices_n2_alone_1gbit.json \
      > $R/devices_n2_alone_1gbit_validation.txt ;;
  devices-n4-1gbit-steady-rest)  # issue 26: the other two zoo models past the first cycles,
    # as devices-n4-1gbit-steady (measured after the pipeline's change, out of its sample)
    $PY -m ralp.bench --backend netns --bandwidth 1gbit --models alexnet overfeat \
      --image-size 75 --batch-size 8 --modes ps ralp-h ralp-n --devices 4 --steps 12 \
      --warmup 16 --repeat 3 --calibrate --quiet --out $R/devices_n4_1gbit_steady_rest.json \
      --plot $R/devices_n4_1gbit_steady_rest.png || true
    $PY -m ralp.planner --validate $R/devices_n4_1gbit_steady.json \
      $R/devices_n4_1gbit_steady_rest.json > $R/devices_n4_1gbit_steady_zoo_validation.txt ;;
  devices-n8-500mbit-steady)  # issue 26: N = 8 past the epoch's first cycles (16 warm-up
    # steps per worker, 12 measured): resnet50, where the in-epoch window missed most (RALP-N +38%)
    $PY -m ralp.bench --backend netns --bandwidth 500mbit --models resnet50 \
      --image-size 75 --batch-size 8 --modes ps ralp-n --devices 8 --steps 12 \
      --warmup 16 --repeat 3 --calibrate --quiet --out $R/devices_n8_500mbit_steady.json \
      --plot $R/devices_n8_500mbit_steady.png || true
    $PY -m ralp.planner --validate $R/devices_n8_500mbit_steady.json \
      > $R/devices_n8_500mbit_steady_validation.txt ;;
  devices-n4-500mbit-steady)  # issue 26: the in-epoch sweep's worst N = 4 settings (500 Mbit/s:
    # overfeat RALP-H +29%, resnet50 RALP-N +26%) past the epoch's first cycles
    $PY -m ralp.bench --backend netns --bandwidth 500mbit --models resnet50 overfeat \
      --image-size 75 --batch-size 8 --modes ps ralp-h ralp-n --devices 4 --steps 12 \
      --warmup 16 --repeat 3 --calibrate --quiet --out $R/devices_n4_500mbit_steady.json \
      --plot $R/devices_n4_500mbit_steady.png || true
    $PY -m ralp.planner --validate $R/devices_n4_500mbit_steady.json \
      > $R/devices_n4_500mbit_steady_validation.txt ;;
  devices-n8-500mbit-inception3-steady)  # issue 26: the in-epoch sweep's worst N = 8 inception3
    # settings (500 Mbit/s: RALP-N +29%, RALP-H +25%) past the epoch's first cycles
    $PY -m ralp.bench --backend netns --bandwidth 500mbit --models inception3 \
      --image-size 75 --batch-size 8 --modes ps ralp-h ralp-n --devices 8 --steps 12 \
      --warmup 16 --repeat 3 --calibrate --quiet \
      --out $R/devices_n8_500mbit_inception3_steady.json \
      --plot $R/devices_n8_500mbit_inception3_steady.png || true
    $PY -m ralp.planner --validate $R/devices_n8_500mbit_inception3_steady.json \
      > $R/devices_n8_500mbit_inception3_steady_validation.txt ;;
  devices-two-workers-1gbit)  # issue 26: RALP's workers alone (N = 2: 1 + 1) beside two (RALP-H,
    # 2 + 1) and three (RALP-N, 3 + 1) on one PS, every device of the N = 4 budget (0.425 CPU),
    # interleaved: do two workers on one PS task take turns, each stepping as alone?
    $PY -m ralp.bench --backend netns --bandwidth 1gbit --models resnet50 overfeat \
      --image-size 75 --batch-size 8 --modes ralp-h ralp-n --devices 2 4 --device-cpus 0.425 \
      --steps 12 --warmup 16 --repeat 3 --calibrate --quiet \
      --out $R/devices_two_workers_1gbit.json --plot $R/devices_two_workers_1gbit.png || true
    $PY -m ralp.planner --validate $R/devices_two_workers_1gbit.json \
      > $R/devices_two_workers_1gbit_validation.txt ;;
  devices-two-workers-resnet50-1gbit|devices-two-workers-overfeat-1gbit)  # the same, one model
    # each, to get 3 rounds in an hour: with both files every two-workers setting in 3 rounds
    model=${part#devices-two-workers-}; model=${model%-1gbit}
    $PY -m ralp.bench --backend netns --bandwidth 1gbit --models "$model" \
      --image-size 75 --batch-size 8 --modes ralp-h ralp-n --devices 2 4 --device-cpus 0.425 \
      --steps 12 --warmup 16 --repeat 3 --calibrate --quiet \
      --out $R/devices_two_workers_${model}_1gbit.json \
      --plot $R/devices_two_workers_${model}_1gbit.png || true
    $PY -m ralp.planner --validate $R/devices_two_workers_${model}_1gbit.json \
      > $R/devices_two_workers_${model}_1gbit_validation.txt ;;
  turns-one-ps-resnet50-500mbit)  # issue 26: do two workers on one PS task take turns without
    # RALP's tail there? plain PS and RALP-H, one worker and two on one PS task, every device
    # at the N = 4 budget (0.425 CPU), 500 Mbit/s (the links a third of a step alone or more),
    # past the first cycles; the rounds interleaved by this loop
    $PY -m ralp.planner --calibrate --model resnet50 --batch-size 8 --image-size 75 \
      --device-cpus 0.425 --devices 4 --transfer-rates 500mbit \
      --output $R/turns_one_ps_resnet50_calibration.json
    parts_dir=$(mktemp -d)
    for r in 1 2 3; do
      for w in 1 2; do
        $PY -m ralp.bench --backend netns --bandwidth 500mbit --models resnet50 \
          --image-size 75 --batch-size 8 --modes ps ralp-h --workers $w --ps 1 \
          --device-cpus 0.425 --steps 8 --warmup 10 --quiet \
          --out "$parts_dir/w$w-r$r.json" || true
      done
    done
    # each file is one round of its shape (w1-r1 w1-r2 w1-r3 w2-r1 ...): read as 3 rounds
    $PY -m ralp.bench --show "$parts_dir"/*.json --as-rounds \
      --out $R/turns_one_ps_resnet50_500mbit.json
    rm -rf "$parts_dir"
    $PY -m ralp.planner --validate $R/turns_one_ps_resnet50_500mbit.json \
      --compute-profile $R/turns_one_ps_resnet50_calibration.json \
      > $R/turns_one_ps_resnet50_500mbit_validation.txt ;;
  turns-one-ps-resnet50-750mbit)  # issue 26: the bistable rule (committed first) on a setting
    # it was not chosen on: two workers on one PS task, plain PS and RALP-H, 750 Mbit/s
    $PY -m ralp.planner --calibrate --model resnet50 --batch-size 8 --image-size 75 \
      --device-cpus 0.425 --devices 4 --transfer-rates 750mbit \
      --output $R/turns_one_ps_resnet50_750mbit_calibration.json
    $PY -m ralp.bench --backend netns --bandwidth 750mbit --models resnet50 --image-size 75 \
      --batch-size 8 --modes ps ralp-h --workers 2 --ps 1 --device-cpus 0.425 --steps 8 \
      --warmup 10 --repeat 3 --quiet --out $R/turns_one_ps_resnet50_750mbit.json || true
    $PY -m ralp.planner --validate $R/turns_one_ps_resnet50_750mbit.json \
      --compute-profile $R/turns_one_ps_resnet50_750mbit_calibration.json \
      > $R/turns_one_ps_resnet50_750mbit_validation.txt ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
  esac
done
