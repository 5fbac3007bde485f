#!/usr/bin/env bash
# Checkpoints across plans, through the local launcher: a job saved under tp2 x pp2 x dp2
# (8 processes) resumes under tp1 x pp4 x dp2 and under a single process with the next losses
# within 1e-5 (relative) of the uninterrupted run, and under the same plan bit for bit. A stop
# signal that reaches rank 0 only (test hook) still stops all 4 ranks of tp2 x pp2 after the
# same step, with one committed checkpoint, exit 138 and a resumable job.
# Usage: ckpt_reshard.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
. "$(dirname "$0")/ckpt_common.bash"
export HOLMES_LAUNCH_GRACE_S=2
job=(--set model.layers=6 --set model.hidden=64 --set model.heads=4 --set model.max_seq_len=32
  --set train.seq_len=32 --set train.micro_batch=2 --set train.global_batch=16 --set train.steps=20
  --set train.warmup_steps=2 --set train.eval_interval=0 --set log.interval=1 --set data.synthetic.tokens=100000
  --set cluster.device_tflops=1 --set checkpoint.interval=10)
plan() { echo --set parallel.tensor="$1" --set parallel.pipeline="$2" --set parallel.data="$3" --nproc-per-node $(($1 * $2 * $3)); }
# job_run NAME ARGS...: the job into $tmp/NAME (at most 120 s); exit code in $rc.
job_run() {
  local name=$1
  shift
  timeout 120 "$bin" "${job[@]}" --set job.output_dir="$tmp/$name" "$@" >"$tmp/$name.log" 2>&1
  rc=$?
}
# close NAME FIRST TOLERANCE: steps FIRST..20 of NAME against the uninterrupted run (each
# logged once; a job resumed in its own output folder also keeps the steps before FIRST).
close() {
  python3 - "$tmp/ref/metrics.jsonl" "$tmp/$1/metrics.jsonl" "$1" "$2" "$3" <<'PY' || fail=1
import json, sys
ref_path, got_path, name, first, tol = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
def steps(p):
    return [(r["step"], r["loss"]) for r in map(json.loads, open(p)) if "loss" in r and "step_ms" in r]
ref = dict(steps(ref_path))
logged = [s for s, _ in steps(got_path)]
assert sorted(logged) == sorted(set(logged)) and set(range(first, 21)) <= set(logged), \
    f"FAIL {name}: logged steps {logged}"
got = {s: l for s, l in steps(got_path) if s >= first}
worst = max(abs(got[s] - ref[s]) / abs(ref[s]) for s in got)
assert worst <= tol, f"FAIL {name}: largest relative difference {worst:.2e} > {tol}"
print(f"{name}: steps {first}..20, largest relative difference {worst:.2e}")
PY
}

job_run ref $(plan 2 2 2)
[ "$rc" -eq 0 ] || { bad "tp2 x pp2 x dp2: exit $rc" "$tmp/ref.log"; exit 1; }
ckpt="$tmp/ref/checkpoints/step-00000010"
[ -f "$ckpt/COMMITTED" ] && [ "$(ls "$ckpt" | grep -c '^rank-.*\.bin$')" -eq 8 ] || bad "no 8-rank checkpoint at step 10"

job_run pp4 $(plan 1 4 2) --resume "$ckpt"
[ "$rc" -eq 0 ] || bad "tp1 x pp4 x dp2 resume: exit $rc" "$tmp/pp4.log"
grep -q "continuing from .*step-00000010 at step 10 .*another plan: resharded" "$tmp/pp4.log" ||
  bad "pp4: no resharding line" "$tmp/pp4.log"
close pp4 11 1e-5

job_run single --resume "$ckpt"
[ "$rc" -eq 0 ] || bad "single-process resume: exit $rc" "$tmp/single.log"
close single 11 1e-5

job_run same $(plan 2 2 2) --resume "$ckpt"
[ "$rc" -eq 0 ] || bad "same-plan resume: exit $rc" "$tmp/same.log"
close same 11 0

HOLMES_TEST_SIGNAL_AFTER_STEP=5:USR1 job_run stop $(plan 2 2 1)
[ "$rc" -eq 138 ] || bad "stop: launcher exit $rc, expected 138" "$tmp/stop.log"
[ "$(grep -c 'stopped by signal 10 after step 5 of 20' "$tmp/stop.log")" -eq 1 ] || bad "stop: no stop line" "$tmp/stop.log"
[ -f "$tmp/stop/checkpoints/step-00000005/COMMITTED" ] || bad "stop: no checkpoint at step 5" "$tmp/stop.log"
[ "$(grep -c '"step": 5' "$tmp/stop/checkpoints/step-00000005/manifest.json")" -ge 1 ] || bad "stop: manifest"
job_run stop $(plan 2 2 1) --resume auto
[ "$rc" -eq 0 ] || bad "stop: resumed job exit $rc" "$tmp/stop.log"
close stop 6 1e-5

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
