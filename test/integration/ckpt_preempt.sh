#!/usr/bin/env bash
# Preemption through the local launcher (--nproc-per-node 1, and 2 data-parallel workers):
# SIGTERM or SIGUSR1 to the launcher reaches the workers, which finish their step, save a
# checkpoint and exit 128+N (the launcher too); a resubmitted job with --resume auto continues
# where it stopped and its losses equal an uninterrupted run's (bit for bit with one worker).
# Usage: ckpt_preempt.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
. "$(dirname "$0")/ckpt_common.bash"
steps=1000

run "$tmp/ref" "$steps"
[ "$rc" -eq 0 ] || { bad "uninterrupted run: exit $rc" "$tmp/ref.log"; exit 1; }

# NAME SIGNAL WORKERS: one preemption and resubmission (2 workers: data-parallel, the
# losses within 1e-5 of the single process; the launcher forwards the signal to both).
for job in "TERM TERM 1" "USR1 USR1 1" "dp2 TERM 2"; do
  read -r name sig nproc <<<"$job"
  out="$tmp/$name"
  want=$((128 + $(kill -l "$sig")))
  par=(--nproc-per-node "$nproc")
  [ "$nproc" -gt 1 ] && par+=(--set parallel.data="$nproc" --set parallel.tensor=1 --set parallel.pipeline=1)
  # No `timeout` wrapper here: it would take the signal itself. The job ends on its own anyway.
  "$bin" "${tiny[@]}" --set job.output_dir="$out" --set train.steps="$steps" "${par[@]}" >"$out.log" 2>&1 &
  pid=$!
  # Signal once the job is a few steps in (at most 20 s).
  for _ in $(seq 400); do
    [ -f "$out/metrics.jsonl" ] && [ "$(wc -l <"$out/metrics.jsonl")" -ge 5 ] && break
    sleep 0.05
  done
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" -eq "$want" ] || bad "$name: launcher exit $rc, expected $want" "$out.log"
  stop=$(sed -n 's/.*stopped by signal [0-9]* after step \([0-9]*\) of.*/\1/p' "$out.log")
  [ -n "$stop" ] && [ "$stop" -lt "$steps" ] || { bad "$name: no stop line" "$out.log"; continue; }
  [ -f "$out/checkpoints/$(printf 'step-%08d' "$stop")/COMMITTED" ] || bad "$name: no checkpoint at step $stop"
  timeout 120 "$bin" "${tiny[@]}" --set job.output_dir="$out" --set train.steps="$steps" "${par[@]}" --resume auto \
    >>"$out.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || bad "$name: resumed job exit $rc" "$out.log"
  grep -q "continuing from .* at step $stop " "$out.log" || bad "$name: did not continue at step $stop" "$out.log"
  echo "$name: stopped after step $stop, exit $want, resumed"
  tol=0
  [ "$nproc" -gt 1 ] && tol=1e-5
  LOSS_TOL=$tol same_losses "$tmp/ref/metrics.jsonl" 1 "$steps" "$out/metrics.jsonl" || fail=1
done

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
