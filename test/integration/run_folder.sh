#!/usr/bin/env bash
# Nothing the user wrote is lost (issue 11): a job.output_dir belongs to one run.
#   - a fresh start into a folder holding another run is refused (exit 2, the folder and the
#     three ways out named) and leaves every file of that run as it was;
#   - --resume auto continues that run; --overwrite replaces it (its checkpoints, final
#     weights and metrics deleted first, a new run id recorded);
#   - resuming into a folder that holds another run is refused too;
#   - --resume names what it was given when that is not a checkpoint, and accepts a run's
#     output folder;
#   - a flipped byte in final/model.bin is caught by sample, eval and export (exit 2);
#   - job.output_dir or checkpoint.dir that cannot be written stops the job before a step.
# Usage: run_folder.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
. "$(dirname "$0")/ckpt_common.bash"

# writer.lock aside: the lock every run takes first records who took it last.
sums() { find "$1" -type f ! -name '*.log' ! -name writer.lock -print0 | sort -z | xargs -0 md5sum; }
refused() {  # refused NAME LOG FRAGMENT...: exit 2 and every fragment in the log
  local name=$1 log=$2; shift 2
  [ "$rc" -eq 2 ] || bad "$name: exit $rc, expected 2" "$log"
  for f in "$@"; do grep -qF -- "$f" "$log" || bad "$name: message lacks '$f'" "$log"; done
  ! grep -q '^step ' "$log" || bad "$name: trained before refusing" "$log"
}
run_id() { sed -n 's/.*"run": "\([0-9a-f]*\)".*/\1/p' "$1/run.json"; }

a="$tmp/a"
run "$a" 6 --set checkpoint.interval=2 --set checkpoint.keep=2
[ "$rc" -eq 0 ] || { bad "first run: exit $rc" "$a.log"; exit 1; }
first=$(run_id "$a")
[ -n "$first" ] || bad "first run: no run id in run.json"
grep -q "\"run\": \"$first\"" "$a/checkpoints/step-00000006/manifest.json" || bad "manifest lacks the run id"
before=$(sums "$a")

# The issue's reproduction: the same job again with fewer steps into the same folder.
: >"$tmp/again.log"
"$bin" "${tiny[@]}" --set job.output_dir="$a" --set train.steps=3 >"$tmp/again.log" 2>&1
rc=$?
refused "fresh start into a used folder" "$tmp/again.log" "job.output_dir: $a already holds a run" "$first" \
  "step-00000004" "step-00000006" "--resume auto" "job.output_dir=DIR" "--overwrite"
[ "$(sums "$a")" = "$before" ] || bad "the refused run changed files of the first run"
echo "fresh start refused, files untouched"

# weights-only fine-tuning is a new run too
"$bin" "${tiny[@]}" --set job.output_dir="$a" --set train.steps=3 --resume auto --weights-only >"$tmp/wo.log" 2>&1
rc=$?
refused "weights-only into a used folder" "$tmp/wo.log" "already holds a run"

# --resume auto continues the same run; retention keeps the newest 2 of it
run "$a" 10 --set checkpoint.interval=2 --set checkpoint.keep=2 --resume auto
[ "$rc" -eq 0 ] || bad "resume auto: exit $rc" "$a.log"
[ "$(run_id "$a")" = "$first" ] || bad "resume auto changed the run id"
[ "$(ls "$a/checkpoints")" = "$(printf 'step-00000008\nstep-00000010')" ] || bad "retention: $(ls "$a/checkpoints" | tr '\n' ' ')"

# --overwrite: the old run's outputs are deleted, a new run starts
run "$a" 4 --set checkpoint.interval=2 --overwrite
[ "$rc" -eq 0 ] || bad "overwrite: exit $rc" "$a.log"
second=$(run_id "$a")
[ -n "$second" ] && [ "$second" != "$first" ] || bad "overwrite kept the run id $first"
[ "$(ls "$a/checkpoints")" = "$(printf 'step-00000002\nstep-00000004')" ] || bad "overwrite: $(ls "$a/checkpoints" | tr '\n' ' ')"
grep -q "overwrite: deleted $a/checkpoints/step-00000010" "$a.log" || bad "overwrite did not say what it deleted" "$a.log"
[ "$(grep -c '"loss"' "$a/metrics.jsonl")" -eq 4 ] || bad "overwrite: metrics of the old run remain"
echo "resume auto continues run $first; --overwrite starts run $second"

# Resuming run A into folder B that holds another run is refused.
b="$tmp/b"
run "$b" 2
"$bin" "${tiny[@]}" --set job.output_dir="$b" --set train.steps=6 --resume "$a" >"$tmp/mix.log" 2>&1
rc=$?
refused "resume into a folder of another run" "$tmp/mix.log" "holds another run's outputs" "continues run $second"
# ... but a run's output folder is accepted as --resume, into a fresh folder
c="$tmp/c"
run "$c" 6 --resume "$a"
[ "$rc" -eq 0 ] || bad "--resume OUTPUT_DIR: exit $rc" "$c.log"
grep -q "continuing from $a/checkpoints/step-00000004 (the newest complete checkpoint in $a/checkpoints) at step 4" \
  "$c.log" || bad "--resume OUTPUT_DIR did not take the newest checkpoint" "$c.log"
[ "$(run_id "$c")" = "$second" ] || bad "--resume OUTPUT_DIR: the run id is not the continued run's"

# --resume given something that is not a checkpoint: what it is, and what is accepted
mkdir -p "$tmp/unrelated" && echo hi >"$tmp/unrelated/notes.txt"
for what in "$tmp/unrelated|a folder of 1 entry (notes.txt) without a checkpoint" \
            "$tmp/unrelated/notes.txt|a file of 3 bytes, not a checkpoint folder" \
            "$tmp/missing|checkpoint folder does not exist" \
            "$a/final/model.bin|(final weights: no optimizer state), not a checkpoint folder"; do
  path=${what%%|*} frag=${what#*|}
  "$bin" "${tiny[@]}" --set job.output_dir="$tmp/r" --set train.steps=2 --resume "$path" >"$tmp/r.log" 2>&1
  rc=$?
  refused "--resume $path" "$tmp/r.log" "checkpoint.resume (--resume): $path: " "$frag" "accepted: auto, none"
done
mkdir -p "$tmp/inc/step-00000003"
"$bin" "${tiny[@]}" --set job.output_dir="$tmp/r" --set train.steps=2 --resume "$tmp/inc" >"$tmp/r.log" 2>&1
rc=$?
refused "--resume of only incomplete checkpoints" "$tmp/r.log" "$tmp/inc: only incomplete checkpoints"
echo "--resume names what it was given"

# final/model.bin carries a checksum: one flipped byte is refused by every reader
w="$a/final/model.bin"

printf 'hello world, a few bytes of text to evaluate on\n%.0s' $(seq 40) >"$tmp/text.txt"
"$bin" prepare-data --input "$tmp/text.txt" --out "$tmp/tok.bin" >/dev/null || bad "prepare-data"
"$bin" sample --checkpoint "$w" --prompt x --max-tokens 2 >"$tmp/s.log" 2>&1 || bad "sample of intact weights" "$tmp/s.log"
python3 - "$w" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x10
open(p, "wb").write(bytes(b))
PY
for cmd in "sample --checkpoint $w --prompt x --max-tokens 2" "export --checkpoint $w --out $tmp/hf" \
            "eval --checkpoint $w --tokens $tmp/tok.bin --seq-len 8 --batch-size 1"; do
  $bin $cmd >"$tmp/flip.log" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] || bad "${cmd%% *} of a flipped weights file: exit $rc" "$tmp/flip.log"
  grep -q "model.bin: corrupted weights: CRC32C" "$tmp/flip.log" || bad "${cmd%% *}: no checksum message" "$tmp/flip.log"
done
[ ! -e "$tmp/hf" ] || bad "export wrote a folder from corrupted weights"
echo "a flipped byte in final/model.bin is refused"

# Folders that cannot be written: the job stops before its first step, naming the key.
echo x >"$tmp/a-file"
for what in "job.output_dir=$tmp/a-file|job.output_dir: '$tmp/a-file': $tmp/a-file is a file" \
            "checkpoint.dir=$tmp/a-file/ck|checkpoint.dir: '$tmp/a-file/ck': $tmp/a-file is a file" \
            "job.output_dir=/proc/holmes-test-out|job.output_dir: '/proc/holmes-test-out': cannot create it"; do
  set_=${what%%|*} frag=${what#*|}
  out="$tmp/w"
  "$bin" "${tiny[@]}" --set job.output_dir="$out" --set train.steps=2 --set "$set_" >"$tmp/w.log" 2>&1
  rc=$?
  refused "unwritable $set_" "$tmp/w.log" "$frag"
  # the same with two workers: the launcher refuses before it spawns
  "$bin" "${tiny[@]}" --set job.output_dir="$out" --set train.steps=2 --set "$set_" --nproc-per-node 2 \
    --set parallel.data=2 >"$tmp/w2.log" 2>&1
  rc=$?
  refused "unwritable $set_ (2 workers)" "$tmp/w2.log" "$frag"
  ! grep -q '\[rank' "$tmp/w2.log" || bad "unwritable $set_: workers were spawned" "$tmp/w2.log"
done
echo "unwritable folders refused before training"

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
