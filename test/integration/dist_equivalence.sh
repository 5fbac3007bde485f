#!/usr/bin/env bash
# Equivalence of the parallel layouts with the single-process run: with the same seed and data,
# every step's loss of tp2 x pp2 x dp2 (8 processes), tp4, pp4 with an uneven partition, dp4 and
# tp2 x dp2 is within 1e-4 (relative) of the single-process loss, over 20 steps, and so is the
# validation loss at steps 10 and 20. The workers
# are started by the local launcher (--nproc-per-node) and talk Gloo over loopback.
# Usage: dist_equivalence.sh <holmes-train> <source dir>
set -u
bin=$1
tmp=$(mktemp -d)
source "$(dirname "$0")/dist_common.bash"

run() {  # run NAME NPROC [--set ...]: trains into $tmp/NAME, log in $tmp/NAME.log
  local name=$1 nproc=$2
  shift 2
  local launch=()
  [ "$nproc" -gt 1 ] && launch=(--nproc-per-node "$nproc")
  local t0=$(date +%s%N)
  # Validation at steps 10 and 20 over one global batch: the same sequences under every plan.
  timeout 120 "$exe" "${tiny_job[@]}" --set train.eval_interval=10 --set train.eval_steps=1 \
    --set job.output_dir="$tmp/$name" "$@" "${launch[@]}" >"$tmp/$name.log" 2>&1
  local code=$?
  echo "$name: $nproc process(es), $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  [ "$code" -eq 0 ] || { bad "$name: exit $code" "$tmp/$name.log"; return 1; }
  [ -s "$tmp/$name/metrics.jsonl" ] || { bad "$name: no metrics.jsonl" "$tmp/$name.log"; return 1; }
}

# compare NAME: every step of $tmp/NAME/metrics.jsonl against the single-process run
compare() {
  /usr/bin/python3 - "$tmp/single/metrics.jsonl" "$tmp/$1/metrics.jsonl" "$1" <<'PY' || fail=1
import json, sys
name = sys.argv[3]
def series(path, key):  # step -> value of `key` ("loss" rows or "val_loss" rows)
    return {r["step"]: r[key] for r in map(json.loads, open(path)) if key in r and "step" in r}
worst = 0.0
for key, steps in (("loss", list(range(1, 21))), ("val_loss", [10, 20])):
    ref, got = series(sys.argv[1], key), series(sys.argv[2], key)
    assert sorted(ref) == steps, f"single: {key} at steps {sorted(ref)}, expected {steps}"
    for step, want in sorted(ref.items()):
        if step not in got:
            sys.exit(f"FAIL {name}: no {key} at step {step}")
        rel = abs(got[step] - want) / abs(want)
        worst = max(worst, rel)
        if rel > 1e-4:
            sys.exit(f"FAIL {name}: step {step} {key} {got[step]:.6f} vs single {want:.6f} (relative {rel:.2e} > 1e-4)")
print(f"{name}: 20 steps and 2 validations, largest relative difference {worst:.2e}")
PY
}

run single 1 || finish
grep -q "Plan:" "$tmp/single.log" && bad "single: a single process printed a plan" "$tmp/single.log"

run tp2pp2dp2 8 --set parallel.tensor=2 --set parallel.pipeline=2 --set parallel.data=2 && compare tp2pp2dp2
grep -q "Plan: 8 ranks = tensor 2 x pipeline 2 x data 2" "$tmp/tp2pp2dp2.log" ||
  bad "tp2pp2dp2: rank 0 did not print the plan" "$tmp/tp2pp2dp2.log"
grep -q "waiting on communication" "$tmp/tp2pp2dp2.log" ||
  bad "tp2pp2dp2: no per-rank compute vs communication time" "$tmp/tp2pp2dp2.log"
# Tensor-parallel all-reduces are many small messages; four processes on two busy cores pay a
# few context switches for each, so tp4 takes micro-batches of 4 (the same 16 sequences per
# step, hence the same losses) to halve their number.
run tp4 4 --set parallel.tensor=4 --set parallel.pipeline=1 --set parallel.data=1 --set train.micro_batch=4 && compare tp4
run pp4 4 --set parallel.tensor=1 --set parallel.pipeline=4 --set parallel.data=1 \
  --set 'parallel.partition=[1,2,2,1]' && compare pp4
grep -q "partition" "$tmp/pp4.log" || bad "pp4: no plan printed" "$tmp/pp4.log"
run dp4 4 --set parallel.tensor=1 --set parallel.pipeline=1 --set parallel.data=4 && compare dp4
run tp2dp2 4 --set parallel.tensor=2 --set parallel.pipeline=1 --set parallel.data=2 --set train.micro_batch=4 &&
  compare tp2dp2
no_leftovers "equivalence"
finish
