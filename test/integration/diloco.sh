#!/usr/bin/env bash
# parallel.outer diloco through the local launcher: 4 workers, 4 replicas, inner_steps 4,
# checkpoints every 3 steps (so they fall between outer syncs, at 3, 6, 9, ...).
# (1) Bad input: diloco with one replica exits 2 naming the keys, before any work.
# (2) SIGKILL mid-way between two outer syncs (after step 10; syncs after 8 and 12): --resume
#     auto continues from step 9 and the losses of every step equal the uninterrupted run's
#     bit for bit (each replica's own weights, moments, anchor and momentum came back).
# (1b) The replicas sum their loss and stop flags across the replicas only where they meet
#     anyway (Agreement::kAtSyncs): before each outer sync's exchange, at checkpoints and at the
#     last step. Rows of the other steps carry rank 0's replica's loss (loss_replica) and their
#     lines say so; without checkpoints there are exactly as many sums as outer syncs (4 in
#     16 steps), not one per step.
# (2b) SIGTERM in step 10 on rank 0: the stop flags cross the replicas at the next sum, the
#     outer sync after step 12, so every rank stops after step 12 (a job without replicas
#     stops after step 10); checkpoint 12 is committed with every rank's private state, the log
#     has every step up to 12 once (validation every 4 steps, which takes the job's loss of its
#     step: step 4's line, its validation, then step 5's) and the resumed run equals the
#     uninterrupted one bit for bit.
# (2c) A replica's loss turns NaN in step 10 (HOLMES_TEST_NAN_LOSS): every rank stops at the
#     next sum (before the outer sync after step 12) naming replica 2 and step 10, within the
#     time-out (no hang), with checkpoint 9 intact and none after it.
# (3) A replica killed during an outer sync (replica 2 as the sync after step 12 begins): the
#     launcher exits 137 naming rank 2 within cluster.timeout_s, the other ranks name rank 2,
#     checkpoint 12 is not committed, 9 is intact; the resumed run again equals the
#     uninterrupted one bit for bit.
# (4) int8 payloads and 2 staggered fragments train too (losses finite, differ from fp32).
# (5) parallel.outer_overlap: bad value exit 2; exact resume with an exchange in flight; a
#     replica dying with the exchange in flight named.
# Usage: diloco.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
. "$(dirname "$0")/ckpt_common.bash"
steps=16
timeout_s=10
job=(--nproc-per-node 4 --set parallel.replicas=4 --set parallel.outer=diloco --set parallel.inner_steps=4
  --set train.global_batch=8 --set checkpoint.interval=3 --set cluster.timeout_s=$timeout_s --set log.interval=1)

# 1. Bad input.
"$bin" "${tiny[@]}" --set job.output_dir="$tmp/bad" --set parallel.outer=diloco --plan-only >"$tmp/bad.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || bad "diloco with 1 replica: exit $rc, expected 2" "$tmp/bad.log"
grep -q "parallel.outer.*diloco needs parallel.replicas >= 2" "$tmp/bad.log" || bad "bad input not named" "$tmp/bad.log"

run "$tmp/ref" "$steps" "${job[@]}"
[ "$rc" -eq 0 ] || { bad "uninterrupted run: exit $rc" "$tmp/ref.log"; exit 1; }
grep -q "outer '" "$tmp/ref.log" || bad "no outer group in the start-up log" "$tmp/ref.log"
# The replicas meet over the slow links only at outer syncs: the job-wide log figures (a
# reduction over every rank) come on the first line, the line of each outer sync (after steps
# 4, 8, 12) and the last; the other lines (every step is one) are printed with rank 0's own.
got=$(python3 -c 'import json, sys; print(" ".join(str(r["step"]) for r in map(json.loads, open(sys.argv[1])) if "comm_share_ranks" in r))' "$tmp/ref/metrics.jsonl")
[ "$got" = "1 4 8 12 16" ] || bad "job-wide log figures at steps '$got', expected '1 4 8 12 16'" "$tmp/ref.log"
[ "$(grep -c '\] step *[0-9]*/16 ' "$tmp/ref.log")" -eq 16 ] || bad "not every step has its log line" "$tmp/ref.log"
# 1b. Where the job's loss is known: the outer syncs (4 8 12 16), the checkpoints (3 6 9 15).
job_rows() {
  python3 -c 'import json, sys; print(" ".join(str(r["step"]) for r in map(json.loads, open(sys.argv[1])) if "step_ms" in r and "loss_replica" not in r))' "$1"
}
got=$(job_rows "$tmp/ref/metrics.jsonl")
[ "$got" = "3 4 6 8 9 12 15 16" ] || bad "the job's loss on steps '$got', expected '3 4 6 8 9 12 15 16'" "$tmp/ref.log"
grep -q '\] step  5/16 | loss [0-9.]* (replica 0) |' "$tmp/ref.log" || bad "step 5's line does not say its loss is replica 0's" "$tmp/ref.log"
grep -q '\] step  4/16 | loss [0-9.]* |' "$tmp/ref.log" || bad "step 4's line does not carry the job's loss" "$tmp/ref.log"
run "$tmp/quiet" "$steps" "${job[@]}" --set checkpoint.interval=0
[ "$rc" -eq 0 ] || bad "no checkpoints: exit $rc" "$tmp/quiet.log"
got=$(job_rows "$tmp/quiet/metrics.jsonl")
[ "$got" = "4 8 12 16" ] || bad "no checkpoints: the job's loss on steps '$got', expected one per outer sync '4 8 12 16'" "$tmp/quiet.log"
[ "$(grep -c 'rank [0-3]: 4 sum(s) of the loss and stop flags across the replicas in 16 step(s)' "$tmp/quiet.log")" -eq 4 ] \
  || bad "no checkpoints: not 4 sums across the replicas on every rank" "$tmp/quiet.log"
# The sums only say, they change no step: the same gradient norms (each replica's own) as with
# checkpoints, and the same losses on the steps both runs show with the same scope.
python3 - "$tmp/ref/metrics.jsonl" "$tmp/quiet/metrics.jsonl" <<'PY' || fail=1
import json, sys
a, b = ([r for r in map(json.loads, open(p)) if "step_ms" in r] for p in sys.argv[1:3])
assert [r["grad_norm"] for r in a] == [r["grad_norm"] for r in b], "the checkpoints' sums changed the training"
same = [(x["step"], x["loss"], y["loss"]) for x, y in zip(a, b) if ("loss_replica" in x) == ("loss_replica" in y)]
assert len(same) == 12 and all(u == v for _, u, v in same), same
PY

# 2. Killed between two outer syncs.
HOLMES_TEST_SIGNAL_AFTER_STEP=10:KILL run "$tmp/between" "$steps" "${job[@]}"
[ "$rc" -eq 137 ] || bad "between: launcher exit $rc, expected 137" "$tmp/between.log"
[ -f "$tmp/between/checkpoints/step-00000009/COMMITTED" ] || bad "between: no checkpoint at step 9" "$tmp/between.log"
ls "$tmp/between/checkpoints/step-00000009/" | grep -q "private-00003.bin" || bad "between: no private state of rank 3"
run "$tmp/between" "$steps" "${job[@]}" --resume auto
[ "$rc" -eq 0 ] || bad "between: resumed run exit $rc" "$tmp/between.log"
grep -q "continuing from .* at step 9 " "$tmp/between.log" || bad "between: did not continue at step 9" "$tmp/between.log"
same_losses "$tmp/ref/metrics.jsonl" 1 "$steps" "$tmp/between/metrics.jsonl" || fail=1

# 2b. Stopped by SIGTERM: every replica stops after the same step, the next outer sync.
HOLMES_TEST_SIGNAL_AFTER_STEP=10:TERM run "$tmp/term" "$steps" "${job[@]}" --set train.eval_interval=4
[ "$rc" -eq 143 ] || bad "term: launcher exit $rc, expected 143" "$tmp/term.log"
grep -q "stopped by signal 15 after step 12 of $steps" "$tmp/term.log" || bad "term: did not stop after step 12" "$tmp/term.log"
[ -f "$tmp/term/checkpoints/step-00000012/COMMITTED" ] || bad "term: no committed checkpoint at step 12" "$tmp/term.log"
[ "$(ls "$tmp/term/checkpoints/step-00000012/" | grep -c "^private-0000[0-3].bin$")" -eq 4 ] \
  || bad "term: checkpoint 12 lacks a rank's private state" "$tmp/term.log"
awk '/\] step  4\//{s=NR} /\] validation at step 4:/{v=NR} /\] step  5\//{n=NR} END{exit !(s && v > s && n > v)}' \
  "$tmp/term.log" || bad "term: step 4's validation line is not between the lines of steps 4 and 5" "$tmp/term.log"
same_losses "$tmp/ref/metrics.jsonl" 1 12 "$tmp/term/metrics.jsonl" || fail=1
run "$tmp/term" "$steps" "${job[@]}" --set train.eval_interval=4 --resume auto
[ "$rc" -eq 0 ] || bad "term: resumed run exit $rc" "$tmp/term.log"
grep -q "continuing from .* at step 12 " "$tmp/term.log" || bad "term: did not continue at step 12" "$tmp/term.log"
same_losses "$tmp/ref/metrics.jsonl" 1 "$steps" "$tmp/term/metrics.jsonl" || fail=1

# 2c. A replica's loss turns NaN between two outer syncs.
start=$(date +%s)
HOLMES_TEST_NAN_LOSS=10:2 run "$tmp/nan" "$steps" "${job[@]}"
took=$(( $(date +%s) - start ))
[ "$rc" -eq 1 ] || bad "nan: launcher exit $rc, expected 1" "$tmp/nan.log"
grep -q "training loss is not finite on replica 2 at step 10: .*every replica stops after step 12" "$tmp/nan.log" \
  || bad "nan: replica 2 and step 10 not named, or not stopped at the outer sync after step 12" "$tmp/nan.log"
[ -f "$tmp/nan/checkpoints/step-00000009/COMMITTED" ] || bad "nan: checkpoint 9 lost" "$tmp/nan.log"
[ ! -f "$tmp/nan/checkpoints/step-00000012/COMMITTED" ] || bad "nan: checkpoint 12 committed after the NaN" "$tmp/nan.log"
! grep -q "\] step 11/16 | loss [0-9.]* |" "$tmp/nan.log" || bad "nan: step 11 shows a job-wide loss" "$tmp/nan.log"
echo "nan: the job stopped $took s after it started (cluster.timeout_s=$timeout_s)"

# 3. A replica dies during an outer sync.
# dies NAME CKPT_KEPT CKPT_NOT HOOK ARGS...: replica 2 killed by HOLMES_TEST_KILL_IN_OUTER_SYNC=HOOK:
# the launcher exits 137 naming rank 2, checkpoint CKPT_KEPT stays, CKPT_NOT is never committed.
dies() {
  local name=$1 kept=$2 never=$3 hook=$4 start took
  shift 4
  start=$(date +%s)
  HOLMES_TEST_KILL_IN_OUTER_SYNC=$hook run "$tmp/$name" "$steps" "$@"
  took=$(( $(date +%s) - start ))
  [ "$rc" -eq 137 ] || bad "$name: launcher exit $rc, expected 137" "$tmp/$name.log"
  grep -q "rank 2 (pid [0-9]*) was killed by signal 9" "$tmp/$name.log" || bad "$name: rank 2 not named" "$tmp/$name.log"
  [ ! -f "$tmp/$name/checkpoints/$(printf step-%08d "$never")/COMMITTED" ] || bad "$name: step $never committed after the failure"
  [ -f "$tmp/$name/checkpoints/$(printf step-%08d "$kept")/COMMITTED" ] || bad "$name: checkpoint $kept lost" "$tmp/$name.log"
  echo "$name: the job stopped $took s after it started (cluster.timeout_s=$timeout_s):"
  grep -h "rank 2\b" "$tmp/$name.log" | head -3 | cut -c1-240
}
dies during 9 12 12:2 "${job[@]}"
run "$tmp/during" "$steps" "${job[@]}" --resume auto
[ "$rc" -eq 0 ] || bad "during: resumed run exit $rc" "$tmp/during.log"
same_losses "$tmp/ref/metrics.jsonl" 1 "$steps" "$tmp/during/metrics.jsonl" || fail=1

# 4. int8 payload, 2 fragments.
run "$tmp/int8" "$steps" "${job[@]}" --set parallel.outer_dtype=int8 --set parallel.fragments=2
[ "$rc" -eq 0 ] || bad "int8: exit $rc" "$tmp/int8.log"
python3 - "$tmp/ref/metrics.jsonl" "$tmp/int8/metrics.jsonl" <<'PY' || fail=1
import json, math, sys
ra, rb = ([r for r in map(json.loads, open(p)) if "loss" in r and "step_ms" in r] for p in sys.argv[1:3])
assert len(ra) == len(rb) == 16, (len(ra), len(rb))
assert all(math.isfinite(r["loss"]) for r in rb), rb
# (The step after which a sync runs carries the job's loss: step 2 here, 4 in the reference.)
a, b = ([r["grad_norm"] for r in rows] for rows in (ra, rb))
assert a[:2] == b[:2] and a[2:] != b[2:], "int8 with 2 fragments must equal fp32 before the first sync and differ after"
print(f"int8, 2 fragments: last loss {rb[-1]['loss']:.4f} (fp32, 1 fragment: {ra[-1]['loss']:.4f})")
PY

# 5. Overlapped exchange (parallel.outer_overlap=2): sent after steps 4, 8, 12, 16, applied
# after 6, 10, 14. Losses equal the synchronous run's up to step 4 and differ after. SIGKILL
# after step 10: checkpoint 9 was saved with the exchange sent after 8 in flight (landed into
# it, not applied); the resumed run applies it after step 10 and equals the uninterrupted one
# bit for bit. Then a replica dies as the exchange
# after step 8 begins, with the others' exchange in flight: it is named, checkpoint 6 stays.
ov=("${job[@]}" --set parallel.outer_overlap=2)
run "$tmp/ov-bad" "$steps" "${job[@]}" --set parallel.outer_overlap=4 --plan-only
[ "$rc" -eq 2 ] && grep -q "parallel.outer_overlap = 4: .*accepted: 0 .. 3" "$tmp/ov-bad.log" \
  || bad "outer_overlap=4 with inner_steps 4: exit $rc, expected 2 naming the key and 0 .. 3" "$tmp/ov-bad.log"
run "$tmp/ov-ref" "$steps" "${ov[@]}"
[ "$rc" -eq 0 ] || { bad "overlap: uninterrupted run: exit $rc" "$tmp/ov-ref.log"; exit 1; }
grep -q "outer side '" "$tmp/ov-ref.log" || bad "overlap: no outer side group in the start-up log" "$tmp/ov-ref.log"
python3 - "$tmp/ref/metrics.jsonl" "$tmp/ov-ref/metrics.jsonl" <<'PY' || fail=1
import json, sys
a, b = ([r["loss"] for r in map(json.loads, open(p)) if "loss" in r and "step_ms" in r] for p in sys.argv[1:3])
assert len(a) == len(b) == 16, (len(a), len(b))
assert a[:4] == b[:4] and a[4:] != b[4:], "overlap must equal the synchronous run up to the first sync, then differ"
print(f"overlap 2: last loss {b[-1]:.4f} (synchronous: {a[-1]:.4f})")
PY
HOLMES_TEST_SIGNAL_AFTER_STEP=10:KILL run "$tmp/ov-kill" "$steps" "${ov[@]}"
[ "$rc" -eq 137 ] || bad "overlap kill: launcher exit $rc, expected 137" "$tmp/ov-kill.log"
[ -f "$tmp/ov-kill/checkpoints/step-00000009/COMMITTED" ] || bad "overlap kill: no checkpoint at step 9" "$tmp/ov-kill.log"
run "$tmp/ov-kill" "$steps" "${ov[@]}" --resume auto
[ "$rc" -eq 0 ] || bad "overlap kill: resumed run exit $rc" "$tmp/ov-kill.log"
grep -q "continuing from .* at step 9 " "$tmp/ov-kill.log" || bad "overlap kill: did not continue at step 9" "$tmp/ov-kill.log"
same_losses "$tmp/ov-ref/metrics.jsonl" 1 "$steps" "$tmp/ov-kill/metrics.jsonl" || fail=1
dies ov-dies 6 9 8:2 "${ov[@]}"

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
