#!/usr/bin/env bash
# Free space for checkpoints and final weights is checked before training: a file system too
# small for one checkpoint (and the final weights where they share it) stops the job with
# exit 2 before its first step, naming the folder, the bytes needed and free and the ways out
# (also through the local launcher); one that holds a checkpoint but not what checkpoint.keep
# retains warns and trains, and the save that then finds the disk full fails naming the file
# and "No space left on device", leaving the checkpoints committed before it usable.
# A resume on the disk that filled up is refused the same way.
# Needs root to mount small tmpfs file systems (in a mktemp folder, unmounted on exit and on
# signals, in a private mount namespace where unshare works).
# Usage: ckpt_disk_space.sh <holmes-train> <source dir>
set -u
bin=$1
# In a mount namespace of its own where it can have one: its mounts then vanish with it even
# when it is killed outright (a ctest time-out), not only through the trap below.
if [ "$(id -u)" -eq 0 ] && [ -z "${CKPT_DISK_SPACE_NS:-}" ] && unshare --mount --propagation private true 2>/dev/null; then
  CKPT_DISK_SPACE_NS=1 exec unshare --mount --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/ckpt_common.bash"

if [ "$(id -u)" -ne 0 ]; then
  echo "HOLMES_SKIP: mounting a small tmpfs needs root (uid $(id -u))"
  exit 0
fi
mounts=()
cleanup() {
  local m
  for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 141' PIPE
trap 'exit 143' TERM
# small NAME SIZE: a tmpfs of SIZE at $tmp/NAME.
small() {
  mkdir -p "$tmp/$1"
  if ! mount -t tmpfs -o "size=$2" tmpfs "$tmp/$1" 2>"$tmp/mount.err"; then
    echo "HOLMES_SKIP: cannot mount a tmpfs here: $(cat "$tmp/mount.err")"
    exit 0
  fi
  mounts+=("$tmp/$1")
}
# job LOG STEPS [ARGS...]: the tiny job (logs outside the small file systems), exit code in $rc.
# One checkpoint of it is about 489 kB (38.8k parameters x 12 bytes + manifest), its final
# weights 161 kB.
job() {
  local log=$1 steps=$2
  shift 2
  timeout 300 "$bin" "${tiny[@]}" --set train.steps="$steps" "$@" >"$log" 2>&1
  rc=$?
}

# 1. 256 kB: not even one checkpoint. Exit 2 before the first step; nothing of the run written.
small tiny256 256k
job "$tmp/full.log" 2 --set job.output_dir="$tmp/tiny256/out"
[ "$rc" -eq 2 ] || bad "too small: exit $rc, expected 2" "$tmp/full.log"
grep -qE "checkpoint.dir \(default <job.output_dir>/checkpoints\): '$tmp/tiny256/out/checkpoints': its file system has [0-9.]+ kB \([0-9]+ bytes\) free, too little" "$tmp/full.log" ||
  bad "too small: message does not name the folder and its free bytes" "$tmp/full.log"
grep -qE "one checkpoint takes [0-9.]+ kB \([0-9]+ bytes\) \(1 shard file" "$tmp/full.log" ||
  bad "too small: message does not say what one checkpoint needs" "$tmp/full.log"
grep -q "set checkpoint.dir=DIR" "$tmp/full.log" || bad "too small: message names no way out" "$tmp/full.log"
grep -q "^step 1/" "$tmp/full.log" && bad "too small: it trained before stopping" "$tmp/full.log"
[ -e "$tmp/tiny256/out/run.json" ] && bad "too small: run.json was written"
[ -z "$(ls -A "$tmp/tiny256/out/checkpoints" 2>/dev/null)" ] || bad "too small: checkpoints folder not empty"

# 2. The same through the local launcher (each worker checks; 2 data-parallel workers).
job "$tmp/full2.log" 2 --set job.output_dir="$tmp/tiny256/out2" --nproc-per-node 2
[ "$rc" -eq 2 ] || bad "too small, 2 workers: exit $rc, expected 2" "$tmp/full2.log"
grep -qE "its file system has .* free, too little.*\(2 shard files" "$tmp/full2.log" ||
  bad "too small, 2 workers: no message" "$tmp/full2.log"
grep -q "step 1/" "$tmp/full2.log" && bad "too small, 2 workers: it trained" "$tmp/full2.log"

# 3. Checkpoints on a large disk, outputs on a 128 kB file system: the final weights do not fit.
small out128 128k
job "$tmp/out.log" 2 --set job.output_dir="$tmp/out128/out" --set checkpoint.dir="$tmp/ckpt"
[ "$rc" -eq 2 ] || bad "small output folder: exit $rc, expected 2" "$tmp/out.log"
grep -qE "job.output_dir: '$tmp/out128/out': its file system has .* free.*the final weights are [0-9.]+ kB" "$tmp/out.log" ||
  bad "small output folder: message does not name job.output_dir and the final weights" "$tmp/out.log"

# 4. 1 MiB: one checkpoint and the final weights fit, the 3 held at once (keep 3, 3 saves) do
# not: a warning, training; saves 1 and 2 commit, save 3 finds the disk full.
small mib 1m
job "$tmp/warn.log" 3 --set job.output_dir="$tmp/mib/out" --set checkpoint.interval=1 --set checkpoint.keep=3
grep -qE "warning: checkpoint.dir .*enough for one checkpoint but not for the 3 new checkpoints this run holds at once" "$tmp/warn.log" ||
  bad "keep 3: no warning" "$tmp/warn.log"
grep -q "^step 1/3" "$tmp/warn.log" || bad "keep 3: did not train after the warning" "$tmp/warn.log"
grep -q "saved checkpoint step-00000002" "$tmp/warn.log" || bad "keep 3: step 2 not saved" "$tmp/warn.log"
[ "$rc" -eq 1 ] || bad "keep 3: exit $rc, expected 1 (the third save cannot fit)" "$tmp/warn.log"
grep -qE "$tmp/mib/out/checkpoints/step-00000003/rank-00000.bin.tmp: cannot write: No space left on device \(no space left: the file system of $tmp/mib/out/checkpoints/step-00000003 has" "$tmp/warn.log" ||
  bad "keep 3: the failed save does not say 'No space left on device' with its folder" "$tmp/warn.log"
ck="$tmp/mib/out/checkpoints"
[ -e "$ck/step-00000003/COMMITTED" ] && bad "keep 3: the failed save was committed"
ls "$ck"/step-*/*.tmp >/dev/null 2>&1 && bad "keep 3: a temporary file was left behind"
for s in 1 2; do
  [ -e "$ck/step-0000000$s/COMMITTED" ] || bad "keep 3: step $s lost its commit marker"
done
# 5. Resuming there (--resume auto takes step 2): the run's two checkpoints count towards
# checkpoint.keep, but step 3 still needs one checkpoint of room, which the disk no longer has.
before=$(cd "$tmp/mib/out" && find . -type f ! -name writer.lock -exec md5sum {} + | sort)
job "$tmp/again.log" 3 --set job.output_dir="$tmp/mib/out" --set checkpoint.interval=1 --set checkpoint.keep=3 --resume auto
after=$(cd "$tmp/mib/out" && find . -type f ! -name writer.lock -exec md5sum {} + | sort)
[ "$rc" -eq 2 ] || bad "resume on the full disk: exit $rc, expected 2" "$tmp/again.log"
grep -qE "'$tmp/mib/out/checkpoints': its file system has .* free, too little for this run" "$tmp/again.log" ||
  bad "resume on the full disk: no message naming the folder" "$tmp/again.log"
[ "$before" = "$after" ] || bad "resume on the full disk: files changed"
# The last committed checkpoint is intact: it loads (checksums) and training goes on from it.
job "$tmp/resume.log" 3 --set job.output_dir="$tmp/resumed" --resume "$ck/step-00000002"
[ "$rc" -eq 0 ] || bad "resume of step 2 after the failed save: exit $rc" "$tmp/resume.log"
grep -q "continuing from .*step-00000002 at step 2" "$tmp/resume.log" || bad "resume: did not continue at step 2" "$tmp/resume.log"

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
