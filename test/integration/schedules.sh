#!/usr/bin/env bash
# parallel.schedule as a user runs it, through the local launcher on the CPU backend (Gloo):
#   - exactness: a pp2 x dp2 job (4 processes) and a tp2 x pp2 job under zb-h1 with none,
#     selective and full recomputation log 1f1b/none's losses bit for bit;
#   - exact resume: 1f1b and zb-h1 jobs whose rank 0 is killed by SIGKILL after step 6
#     (checkpoints every 4 steps) resume from step 4 to the uninterrupted run's losses;
#   - the plan: auto chooses zb-h1 for the pipeline, shows the runner-up and the gain over 1f1b,
#     and the log's numerics line names the schedule that ran.
# Usage: schedules.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/    /' "$2" | tail -30; fail=1; }
export OMP_NUM_THREADS=1 HOLMES_LAUNCH_GRACE_S=2
job=(--set model.layers=4 --set model.hidden=64 --set model.heads=4 --set model.max_seq_len=32
  --set train.seq_len=32 --set train.micro_batch=2 --set train.global_batch=16 --set train.steps=8
  --set train.warmup_steps=2 --set train.eval_interval=0 --set log.interval=1 --set data.synthetic.tokens=100000
  --set cluster.device_tflops=1 --set checkpoint.keep=10)
grid() { echo --set parallel.tensor="$1" --set parallel.pipeline="$2" --set parallel.data="$3" --nproc-per-node $(($1 * $2 * $3)); }
# job_run NAME ARGS...: the job into $tmp/NAME (at most 180 s); exit code in $rc.
job_run() {
  local name=$1
  shift
  timeout 180 "$bin" "${job[@]}" --set job.output_dir="$tmp/$name" "$@" >>"$tmp/$name.log" 2>&1
  rc=$?
}
# same REF NAME...: the losses of every NAME's metrics.jsonl equal REF's bit for bit, each step once.
same() {
  python3 - "$tmp" "$@" <<'PY' || fail=1
import json, sys
tmp, ref, names = sys.argv[1], sys.argv[2], sys.argv[3:]
def losses(name):
    rows = [r for r in map(json.loads, open(f"{tmp}/{name}/metrics.jsonl")) if "step_ms" in r]
    steps = [r["step"] for r in rows]
    assert len(steps) == len(set(steps)), f"FAIL {name}: steps logged twice: {steps}"
    return {r["step"]: r["loss"] for r in rows}
want = losses(ref)
for n in names:
    got = losses(n)
    if got != want:
        sys.exit(f"FAIL {n}: losses {got} differ from {ref}'s {want}")
print(f"{', '.join(names)}: {ref}'s {len(want)} losses bit for bit")
PY
}

for g in "1 2 2" "2 2 1"; do
  tag=$(echo "$g" | tr ' ' x)
  job_run "ref-$tag" $(grid $g) --set parallel.schedule=1f1b --set train.recompute=none
  [ "$rc" -eq 0 ] || { bad "$tag 1f1b/none: exit $rc" "$tmp/ref-$tag.log"; continue; }
  grep -q "schedule: 1f1b" "$tmp/ref-$tag.log" || bad "$tag: the numerics line does not say 1f1b" "$tmp/ref-$tag.log"
  names=()
  for r in none selective full; do
    job_run "zb-$r-$tag" $(grid $g) --set parallel.schedule=zb-h1 --set train.recompute=$r
    [ "$rc" -eq 0 ] || bad "$tag zb-h1/$r: exit $rc" "$tmp/zb-$r-$tag.log"
    grep -q "recompute: $r, schedule: zb-h1" "$tmp/zb-$r-$tag.log" || bad "$tag zb-h1/$r: numerics line" "$tmp/zb-$r-$tag.log"
    names+=("zb-$r-$tag")
  done
  same "ref-$tag" "${names[@]}"
done

# Exact resume after SIGKILL, each schedule, pp2 x dp2.
for s in 1f1b zb-h1; do
  HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL job_run "kill-$s" $(grid 1 2 2) --set parallel.schedule=$s --set checkpoint.interval=4
  [ "$rc" -ne 0 ] || bad "$s: the killed job exited 0" "$tmp/kill-$s.log"
  [ -f "$tmp/kill-$s/checkpoints/step-00000004/COMMITTED" ] || bad "$s: no checkpoint at step 4" "$tmp/kill-$s.log"
  job_run "kill-$s" $(grid 1 2 2) --set parallel.schedule=$s --set checkpoint.interval=4 --resume auto
  [ "$rc" -eq 0 ] || bad "$s: resumed job: exit $rc" "$tmp/kill-$s.log"
  grep -q "resume: continuing from .*step-00000004 at step 4" "$tmp/kill-$s.log" || bad "$s: did not resume at 4" "$tmp/kill-$s.log"
  python3 - "$tmp/ref-1x2x2/metrics.jsonl" "$tmp/kill-$s/metrics.jsonl" "$s" <<'PY' || fail=1
import json, sys
def losses(p):
    out = {}
    for r in map(json.loads, open(p)):
        if "step_ms" in r:
            out[r["step"]] = r["loss"]  # steps 5-6 of the killed run, logged again after the resume
    return out
ref, got = losses(sys.argv[1]), losses(sys.argv[2])
if got != ref:
    sys.exit(f"FAIL {sys.argv[3]} killed and resumed: losses {got} differ from 1f1b's {ref}")
print(f"{sys.argv[3]}: killed after step 6, resumed at 4: the uninterrupted 1f1b losses bit for bit")
PY
done

# The plan: auto (asked for; the default is 1f1b) picks zb-h1 for the pipeline and shows what it gains over 1f1b.
# Compute-bound as a CPU worker is (0.01 TFLOP/s): at the 1 TFLOP/s the runs above plan with,
# the processes' loopback sends (1.5 ms each, docs/cost-model.md) would set the pace alone.
"$bin" "${job[@]}" $(grid 1 2 2) --set parallel.schedule=auto --set cluster.device_tflops=0.01 --plan-only >"$tmp/plan.txt" 2>&1 || bad "--plan-only: exit $?" "$tmp/plan.txt"
grep -q "Schedule and recomputation (parallel.schedule auto, train.recompute auto): zb-h1, recompute none" "$tmp/plan.txt" ||
  bad "--plan-only: auto did not choose zb-h1" "$tmp/plan.txt"
grep -q "^  runner-up: " "$tmp/plan.txt" || bad "--plan-only: no runner-up" "$tmp/plan.txt"
grep -q "zb-h1 gains +.* throughput over 1f1b, recompute none" "$tmp/plan.txt" || bad "--plan-only: no gain line" "$tmp/plan.txt"

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
