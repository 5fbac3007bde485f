#!/usr/bin/env bash
# The embedded default job (parallel degrees auto) with several local workers: the planner
# makes a Holmes plan for 4 and for 3 cpu devices, rank 0 prints it, the job trains and its
# loss falls; with one process it is still the single-process run (no plan printed).
# Usage: dist_default.sh <holmes-train> <source dir>
set -u
bin=$1
tmp=$(mktemp -d)
source "$(dirname "$0")/dist_common.bash"
short=(--set train.steps=8 --set train.eval_interval=0 --set checkpoint.interval=0 --set log.interval=1)

for n in 4 3; do
  timeout 120 "$exe" "${short[@]}" --set job.output_dir="$tmp/n$n" --nproc-per-node $n >"$tmp/n$n.log" 2>&1
  code=$?
  [ "$code" -eq 0 ] || bad "nproc $n: exit $code" "$tmp/n$n.log"
  grep -q "^\[rank 0\] Plan: $n ranks = tensor [0-9]* x pipeline [0-9]* x data [0-9]* on cpu (holmes placement" \
    "$tmp/n$n.log" || bad "nproc $n: rank 0 printed no Holmes plan for $n cpu devices" "$tmp/n$n.log"
  [ "$(grep -c "Plan:" "$tmp/n$n.log")" -eq 1 ] || bad "nproc $n: the plan is not printed exactly once" "$tmp/n$n.log"
  /usr/bin/python3 - "$tmp/n$n/metrics.jsonl" <<'PY' || bad "nproc $n: metrics" "$tmp/n$n.log"
import json, sys
losses = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r]
assert len(losses) == 8, f"{len(losses)} steps logged, expected 8"
assert losses[-1] < losses[0], f"loss did not fall: {losses[0]} -> {losses[-1]}"
PY
  echo "nproc $n: $(grep -o "Plan: .*" "$tmp/n$n.log")"
  # --plan-only with the same flags prints the plan the run used (same hash).
  want=$("$exe" "${short[@]}" --plan-only --nproc-per-node $n | grep -o "plan hash [0-9a-f]*")
  grep -q "\[rank 0\] $want" "$tmp/n$n.log" || bad "nproc $n: --plan-only printed '$want', not the run's" "$tmp/n$n.log"
  # A sharded run leaves its model in the checkpoints; sample finds it from the output_dir.
  timeout 60 "$exe" sample --checkpoint "$tmp/n$n" --prompt "a " --max-tokens 8 >"$tmp/n$n.sample" 2>&1 ||
    bad "nproc $n: sample --checkpoint <output_dir> failed" "$tmp/n$n.sample"
done

timeout 120 "$exe" "${short[@]}" --set job.output_dir="$tmp/single" >"$tmp/single.log" 2>&1 || bad "single: failed" "$tmp/single.log"
grep -q "Plan:" "$tmp/single.log" && bad "single: printed a plan" "$tmp/single.log"
# Degrees that cannot make the worker count are refused by the launcher before it spawns.
"$exe" --set parallel.tensor=1 --set parallel.pipeline=2 --set parallel.data=2 --nproc-per-node 3 >"$tmp/bad.log" 2>&1
code=$?
[ "$code" -eq 2 ] || bad "degrees 1x2x2 with 3 workers: exit $code, expected 2" "$tmp/bad.log"
grep -q "1 x 2 x 2 cannot make the job's 3 workers" "$tmp/bad.log" || bad "degrees 1x2x2: message" "$tmp/bad.log"
grep -q "started" "$tmp/bad.log" && bad "degrees 1x2x2: workers were started" "$tmp/bad.log"
no_leftovers "default"
finish
