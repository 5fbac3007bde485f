#!/usr/bin/env bash
# A process with another job's token cannot join a running job: it exits non-zero with a
# clear message, and the job it tried to join still completes. The job's two ranks are
# started by hand with torchrun-style variables; the intruder claims rank 1 on the same port.
# Usage: dist_token.sh <holmes-train> <source dir>
set -u
bin=$1
tmp=$(mktemp -d)
source "$(dirname "$0")/dist_common.bash"
job=("${tiny_job[@]}" --set train.steps=200 --set cluster.timeout_s=20 --set parallel.tensor=1
  --set parallel.pipeline=1 --set parallel.data=2 --set job.output_dir="$tmp/job")
port=$(free_port)
pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port HOLMES_JOB_TOKEN=the-real-job \
    timeout 120 "$exe" "${job[@]}" >"$tmp/job.$r.out" 2>&1 &
  pids+=($!)
done
steps_logged() { [ -s "$1" ] && [ "$(grep -c '"loss"' "$1")" -ge "$2" ]; }
wait_for "steps_logged $tmp/job/metrics.jsonl 2" 60 || bad "job: no 2 steps within 60 s" "$tmp/job.0.out"

RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port HOLMES_JOB_TOKEN=another-job \
  timeout 60 "$exe" "${job[@]}" --set job.output_dir="$tmp/intruder" >"$tmp/intruder.out" 2>&1
code=$?
[ "$code" -ne 0 ] || bad "intruder: exit 0, expected a refusal" "$tmp/intruder.out"
[ "$code" -ne 124 ] || bad "intruder: hung until the test's time limit" "$tmp/intruder.out"
grep -qi "token" "$tmp/intruder.out" || bad "intruder: the message does not say the token was refused" "$tmp/intruder.out"
echo "intruder (exit $code): $(grep -i token "$tmp/intruder.out" | head -1 | cut -c1-200)"

for r in 0 1; do
  wait "${pids[$r]}"
  code=$?
  [ "$code" -eq 0 ] || bad "job: rank $r exit $code after the intruder was refused" "$tmp/job.$r.out"
done
[ "$(grep -c '"loss"' "$tmp/job/metrics.jsonl")" -eq 200 ] || bad "job: not all 200 steps logged" "$tmp/job.0.out"
no_leftovers "token"
finish
