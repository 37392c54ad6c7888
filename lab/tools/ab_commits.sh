#!/usr/bin/env bash
# Compare two commits on one bench setting, in interleaved rounds (A 1, B 1, A 2, B 2, ...):
# the way to measure a runtime change before and after on this drifting machine.
#
#   lab/tools/ab_commits.sh BEFORE AFTER ROUNDS OUT_PREFIX -- BENCH_ARGS...
#
# Each commit (committed work only: a working tree's changes are not in it) is checked out
# in a temporary git worktree (removed at exit, also on failure)
# and run with this checkout's virtual environment; each round writes
# OUT_PREFIX_{before,after}_K.json (pass --repeat 1 in BENCH_ARGS: the rounds are the repeats).
# Then python -m lab.tools.ab_summary OUT_PREFIX sums them up. The lab's experiment
# update-gate runs both (python -m lab run update-gate --dry-run shows the commands).
set -euo pipefail
if [ $# -lt 5 ] || [ "$5" != "--" ]; then
  echo "usage: $0 BEFORE AFTER ROUNDS OUT_PREFIX -- BENCH_ARGS..." >&2
  exit 2
fi
before=$1 after=$2 rounds=$3 prefix=$4
shift 5
root=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PY:-$root/.venv/bin/python}
case $prefix in /*) ;; *) prefix=$root/$prefix ;; esac
work=$(mktemp -d -t ralp-ab-XXXXXX)
cleanup() {
  git -C "$root" worktree remove --force "$work/before" 2>/dev/null || true
  git -C "$root" worktree remove --force "$work/after" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
git -C "$root" worktree add -q --detach "$work/before" "$before"
git -C "$root" worktree add -q --detach "$work/after" "$after"
for k in $(seq 1 "$rounds"); do
  for side in before after; do
    # the worktree first on the path: its ralp, not the one installed in the venv
    (cd "$work/$side" && PYTHONPATH="$work/$side" "$PY" -m ralp.bench "$@" \
      --out "${prefix}_${side}_$k.json")
    echo "ab: $side round $k done ($(date -u +%T))"
  done
done
