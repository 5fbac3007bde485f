#!/usr/bin/env bash
# Exact resume on the CPU backend: 20 uninterrupted steps against (a) 10 steps, a stop by
# SIGTERM with its checkpoint, --resume auto and 10 more, and (b) a SIGKILL after step 13
# with checkpoint.interval 5, resumed from step 10: bit-identical losses. Also a SIGKILL
# during a save (the previous checkpoint is used), --resume PATH and --weights-only. Usage: ckpt_resume.sh <holmes-train> <source dir>
set -u
bin=$1
. "$(dirname "$0")/ckpt_common.bash"

run "$tmp/ref" 20
[ "$rc" -eq 0 ] || { bad "uninterrupted run: exit $rc" "$tmp/ref.log"; exit 1; }

# (a) stop after step 10 (the test hook raises SIGTERM in the process), then resume.
HOLMES_TEST_SIGNAL_AFTER_STEP=10:TERM run "$tmp/a" 20
[ "$rc" -eq 143 ] || bad "(a) stopped run: exit $rc, expected 143" "$tmp/a.log"
grep -q "saved checkpoint step-00000010 in .* s (.* MB" "$tmp/a.log" || bad "(a) no save line" "$tmp/a.log"
[ -f "$tmp/a/checkpoints/step-00000010/COMMITTED" ] || bad "(a) no committed checkpoint at step 10"
run "$tmp/a" 20 --resume auto
[ "$rc" -eq 0 ] || bad "(a) resumed run: exit $rc" "$tmp/a.log"
grep -q "resume: continuing from .*step-00000010 at step 10" "$tmp/a.log" || bad "(a) no resume line" "$tmp/a.log"
same_losses "$tmp/ref/metrics.jsonl" 1 20 "$tmp/a/metrics.jsonl" || fail=1

# (b) SIGKILL after step 13 with checkpoints every 5 steps: resumes from step 10.
HOLMES_TEST_SIGNAL_AFTER_STEP=13:KILL run "$tmp/b" 20 --set checkpoint.interval=5
[ "$rc" -eq 137 ] || bad "(b) killed run: exit $rc, expected 137" "$tmp/b.log"
run "$tmp/b" 20 --set checkpoint.interval=5 --resume auto
[ "$rc" -eq 0 ] || bad "(b) resumed run: exit $rc" "$tmp/b.log"
grep -q "resume: continuing from .*step-00000010 at step 10" "$tmp/b.log" || bad "(b) did not resume at step 10" "$tmp/b.log"
# metrics.jsonl continues: steps 1..10 of the killed run, 11..13 dropped, 11..20 of the resumed one.
same_losses "$tmp/ref/metrics.jsonl" 1 20 "$tmp/b/metrics.jsonl" || fail=1
ls "$tmp/b/checkpoints" | grep -q step-00000020 || bad "(b) no final checkpoint"

# (b2) the same with the shard written before the next step instead of beside it.
HOLMES_TEST_SIGNAL_AFTER_STEP=13:KILL run "$tmp/b2" 20 --set checkpoint.interval=5 --set checkpoint.background_write=false
[ "$rc" -eq 137 ] || bad "(b2) killed run: exit $rc, expected 137" "$tmp/b2.log"
grep -q "saved checkpoint step-00000010 in .* s (.* MB)$" "$tmp/b2.log" || bad "(b2) no foreground save line" "$tmp/b2.log"
run "$tmp/b2" 20 --set checkpoint.interval=5 --resume auto
grep -q "resume: continuing from .*step-00000010 at step 10" "$tmp/b2.log" || bad "(b2) did not resume at step 10" "$tmp/b2.log"
same_losses "$tmp/ref/metrics.jsonl" 1 20 "$tmp/b2/metrics.jsonl" || fail=1

# (b3) killed while the step-10 save is being written (before its commit): that folder is
# incomplete, --resume auto skips it, says so and continues exactly from step 5.
HOLMES_TEST_SIGNAL_AFTER_STEP=10:KILL run "$tmp/b3" 20 --set checkpoint.interval=5
[ "$rc" -eq 137 ] || bad "(b3) killed run: exit $rc, expected 137" "$tmp/b3.log"
[ -d "$tmp/b3/checkpoints/step-00000010" ] && [ ! -e "$tmp/b3/checkpoints/step-00000010/COMMITTED" ] ||
  bad "(b3) expected an incomplete step-00000010" "$tmp/b3.log"
run "$tmp/b3" 20 --set checkpoint.interval=5 --resume auto
grep -q "skipping incomplete checkpoint .*step-00000010" "$tmp/b3.log" || bad "(b3) no skip line" "$tmp/b3.log"
grep -q "resume: continuing from .*step-00000005 at step 5" "$tmp/b3.log" || bad "(b3) did not resume at step 5" "$tmp/b3.log"
same_losses "$tmp/ref/metrics.jsonl" 1 20 "$tmp/b3/metrics.jsonl" || fail=1
[ -f "$tmp/b3/checkpoints/step-00000010/COMMITTED" ] || bad "(b3) step 10 not saved again after the resume"

# (c) --resume PATH of the step-5 checkpoint of (b), into a fresh output folder.
run "$tmp/c" 20 --resume "$tmp/b/checkpoints/step-00000005"
[ "$rc" -eq 0 ] || bad "(c) --resume PATH: exit $rc" "$tmp/c.log"
same_losses "$tmp/ref/metrics.jsonl" 6 20 "$tmp/c/metrics.jsonl" || fail=1

# (d) --weights-only: the weights of step 20, a fresh optimizer, step 0 of a new run.
run "$tmp/d" 3 --resume "$tmp/b/checkpoints/step-00000020" --weights-only
[ "$rc" -eq 0 ] || bad "(d) --weights-only: exit $rc" "$tmp/d.log"
grep -q "resume: loaded the weights of .*step-00000020 (step 20); fresh optimizer, starting at step 0" "$tmp/d.log" ||
  bad "(d) no weights-only line" "$tmp/d.log"
python3 - "$tmp/ref/metrics.jsonl" "$tmp/d/metrics.jsonl" <<'PY' || fail=1
import json, sys
ref = [json.loads(l) for l in open(sys.argv[1]) if '"step_ms"' in l]
d = [json.loads(l) for l in open(sys.argv[2]) if '"step_ms"' in l]
assert d[0]["step"] == 1, d[0]
# Starting from trained weights, the first loss is far below a fresh model's.
assert d[0]["loss"] < ref[0]["loss"] - 0.2, (d[0]["loss"], ref[0]["loss"])
print(f"weights only: first loss {d[0]['loss']:.4f} (fresh model {ref[0]['loss']:.4f})")
PY

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
