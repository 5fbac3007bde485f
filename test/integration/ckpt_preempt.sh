#!/usr/bin/env bash
# Preemption through the local launcher (--nproc-per-node 1): SIGTERM or SIGUSR1 to the
# launcher reaches the worker, which finishes its step, saves a checkpoint and exits 128+N
# (the launcher too); a resubmitted job with --resume auto continues where it stopped and its
# losses equal an uninterrupted run's bit for bit. Usage: ckpt_preempt.sh <holmes-train> <src>
set -u
bin=$(readlink -f "$1")
. "$(dirname "$0")/ckpt_common.bash"
steps=1000

run "$tmp/ref" "$steps"
[ "$rc" -eq 0 ] || { bad "uninterrupted run: exit $rc" "$tmp/ref.log"; exit 1; }

for sig in TERM USR1; do
  out="$tmp/$sig"
  want=$((128 + $(kill -l "$sig")))
  "$bin" "${tiny[@]}" --set job.output_dir="$out" --set train.steps="$steps" --nproc-per-node 1 >"$out.log" 2>&1 &
  pid=$!
  # Signal once the job is a few steps in (at most 20 s).
  for _ in $(seq 400); do
    [ -f "$out/metrics.jsonl" ] && [ "$(wc -l <"$out/metrics.jsonl")" -ge 5 ] && break
    sleep 0.05
  done
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" -eq "$want" ] || bad "$sig: launcher exit $rc, expected $want" "$out.log"
  stop=$(sed -n 's/.*stopped by signal [0-9]* after step \([0-9]*\) of.*/\1/p' "$out.log")
  [ -n "$stop" ] && [ "$stop" -lt "$steps" ] || { bad "$sig: no stop line" "$out.log"; continue; }
  [ -f "$out/checkpoints/$(printf 'step-%08d' "$stop")/COMMITTED" ] || bad "$sig: no checkpoint at step $stop"
  "$bin" "${tiny[@]}" --set job.output_dir="$out" --set train.steps="$steps" --nproc-per-node 1 --resume auto \
    >>"$out.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || bad "$sig: resumed job exit $rc" "$out.log"
  grep -q "continuing from .* at step $stop " "$out.log" || bad "$sig: did not continue at step $stop" "$out.log"
  echo "$sig: stopped after step $stop, exit $want, resumed"
  same_losses "$tmp/ref/metrics.jsonl" 1 "$steps" "$out/metrics.jsonl" || fail=1
done

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
