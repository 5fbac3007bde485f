#!/usr/bin/env bash
# parallel.schedule as a user runs it, through the local launcher on the CPU backend (Gloo):
#   - exactness: a pp2 x dp2 job (4 processes) and a tp2 x pp2 job under zb-h1 with none,
#     selective and full recomputation log 1f1b/none's losses bit for bit;
#     and interleaved (V = 2) with none and full recomputation on the same two grids likewise;
#   - exact resume: 1f1b, zb-h1 and interleaved jobs whose rank 0 is killed by SIGKILL after
#     step 6 (checkpoints every 4 steps) resume from step 4 to the uninterrupted run's losses;
#   - across schedules: 1f1b's step-4 checkpoint resumed as interleaved, and interleaved's as
#     1f1b, give the losses of continuing unchanged (bit for bit here; the unit test bounds it);
#   - the interleaved checkpoint resumed on other grids (interleaved tp2 x pp2, 1f1b pp4) within
#     1e-5 relative (other sums), exported to Hugging Face and loaded by init-from into every chunk;
#   - the plan: auto chooses zb-h1 for the pipeline, shows the runner-up and the gain over 1f1b,
#     and the log's numerics line names the schedule that ran.
# Usage: schedules.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
. "$(dirname "$0")/ckpt_common.bash"  # tmp, bad, fail, same_losses
export HOLMES_LAUNCH_GRACE_S=2
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
  for r in none full; do
    job_run "il-$r-$tag" $(grid $g) --set parallel.schedule=interleaved --set parallel.virtual_stages=2 --set train.recompute=$r
    [ "$rc" -eq 0 ] || bad "$tag interleaved/$r: exit $rc" "$tmp/il-$r-$tag.log"
    grep -q "recompute: $r, schedule: interleaved" "$tmp/il-$r-$tag.log" || bad "$tag interleaved/$r: numerics line" "$tmp/il-$r-$tag.log"
    names+=("il-$r-$tag")
  done
  for n in "${names[@]}"; do
    same_losses "$tmp/ref-$tag/metrics.jsonl" 1 8 "$tmp/$n/metrics.jsonl" || bad "$n: not $tag 1f1b/none's losses"
  done
done

# Exact resume after SIGKILL, each schedule, pp2 x dp2 (interleaved: V auto = 2, the most 4 layers allow).
for s in 1f1b zb-h1 interleaved; do
  HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL job_run "kill-$s" $(grid 1 2 2) --set parallel.schedule=$s --set checkpoint.interval=4
  [ "$rc" -ne 0 ] || bad "$s: the killed job exited 0" "$tmp/kill-$s.log"
  [ -f "$tmp/kill-$s/checkpoints/step-00000004/COMMITTED" ] || bad "$s: no checkpoint at step 4" "$tmp/kill-$s.log"
  grep -q "schedule: $s" "$tmp/kill-$s.log" || bad "$s: the numerics line does not say $s" "$tmp/kill-$s.log"
  # Saved from the copy of every chunk's buffers while step 5 ran (CheckpointSaver::start).
  grep -q "saved checkpoint step-00000004 .*in the background" "$tmp/kill-$s.log" ||
    bad "$s: step 4 was not written in the background" "$tmp/kill-$s.log"
  job_run "kill-$s" $(grid 1 2 2) --set parallel.schedule=$s --set checkpoint.interval=4 --resume auto
  [ "$rc" -eq 0 ] || bad "$s: resumed job: exit $rc" "$tmp/kill-$s.log"
  grep -q "resume: continuing from .*step-00000004 at step 4" "$tmp/kill-$s.log" || bad "$s: did not resume at 4" "$tmp/kill-$s.log"
  same_losses "$tmp/ref-1x2x2/metrics.jsonl" 1 8 "$tmp/kill-$s/metrics.jsonl" ||
    bad "$s killed after step 6 and resumed at 4: not the uninterrupted 1f1b losses"
done

# A checkpoint resumed under the other schedule (loaded by tensor name: another plan, resharded)
# continues as the saving run did after its own resume.
for pair in "1f1b interleaved" "interleaved 1f1b"; do
  read -r from to <<<"$pair"
  job_run "cross-$from-$to" $(grid 1 2 2) --set parallel.schedule=$to --set checkpoint.interval=4 \
    --resume "$tmp/kill-$from/checkpoints/step-00000004"
  [ "$rc" -eq 0 ] || bad "$from checkpoint resumed as $to: exit $rc" "$tmp/cross-$from-$to.log"
  grep -q "resume: continuing from .*step-00000004 at step 4 .*another plan: resharded" "$tmp/cross-$from-$to.log" ||
    bad "$from checkpoint resumed as $to: not resumed at 4 as another plan" "$tmp/cross-$from-$to.log"
  same_losses "$tmp/kill-$from/metrics.jsonl" 5 8 "$tmp/cross-$from-$to/metrics.jsonl" ||
    bad "$from checkpoint resumed as $to: not the losses of $from continuing"
done

# Other grids: the interleaved pp2 x dp2 checkpoint resumed as interleaved on tp2 x pp2 and as 1f1b
# on pp4 (resharded by tensor name; other tensor- and data-parallel sums, so within 1e-5 relative).
for row in "interleaved 2 2 1" "1f1b 1 4 1"; do
  read -r to t p d <<<"$row"
  job_run "grid-$to" $(grid $t $p $d) --set parallel.schedule=$to --set checkpoint.interval=4 \
    --resume "$tmp/kill-interleaved/checkpoints/step-00000004"
  [ "$rc" -eq 0 ] || bad "interleaved checkpoint resumed as $to on ${t}x${p}x${d}: exit $rc" "$tmp/grid-$to.log"
  grep -q "resume: continuing from .*step-00000004 at step 4 .*another plan: resharded" "$tmp/grid-$to.log" ||
    bad "interleaved checkpoint resumed as $to on ${t}x${p}x${d}: not resumed at 4" "$tmp/grid-$to.log"
  LOSS_TOL=1e-5 same_losses "$tmp/kill-interleaved/metrics.jsonl" 5 8 "$tmp/grid-$to/metrics.jsonl" ||
    bad "interleaved checkpoint resumed as $to on ${t}x${p}x${d}: not within 1e-5 of continuing"
done

# The interleaved run's weights exported (read by tensor name) and loaded by checkpoint.init_from
# into every chunk: interleaved and 1f1b runs started from them log the same losses.
"$bin" export --checkpoint "$tmp/kill-interleaved/checkpoints" --out "$tmp/hf-il" >"$tmp/hf-il.log" 2>&1 ||
  bad "export of the interleaved checkpoint: exit $?" "$tmp/hf-il.log"
for s in 1f1b interleaved; do
  job_run "init-$s" $(grid 1 2 2) --set parallel.schedule=$s --init-from "$tmp/hf-il"
  [ "$rc" -eq 0 ] || bad "$s from the exported interleaved weights: exit $rc" "$tmp/init-$s.log"
  grep -q "init-from: started from the weights" "$tmp/init-$s.log" || bad "$s: init-from not loaded" "$tmp/init-$s.log"
done
same_losses "$tmp/init-1f1b/metrics.jsonl" 1 8 "$tmp/init-interleaved/metrics.jsonl" ||
  bad "interleaved started from the exported weights: not 1f1b's losses from them"
! same_losses "$tmp/ref-1x2x2/metrics.jsonl" 1 1 "$tmp/init-1f1b/metrics.jsonl" >/dev/null ||
  bad "the runs from the exported weights log a fresh run's first loss: init-from did nothing"

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
