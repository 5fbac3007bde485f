#!/usr/bin/env bash
# Bad checkpoints stop the job with exit 2 and a message naming the file and the problem,
# and nothing is overwritten: a truncated shard, a corrupted byte, a future format version,
# another model shape, a missing commit marker (--resume PATH), a malformed manifest.
# Usage: ckpt_corrupt.sh <holmes-train> <source dir>
set -u
bin=$1
. "$(dirname "$0")/ckpt_common.bash"

run "$tmp/good" 4 --set checkpoint.interval=2
[ "$rc" -eq 0 ] || { bad "saving run: exit $rc" "$tmp/good.log"; exit 1; }
good="$tmp/good/checkpoints/step-00000004"

# expect NAME PATTERN [ARGS...]: resuming a damaged copy of the checkpoint in $tmp/NAME exits 2,
# the output matches PATTERN, and neither the checkpoints nor the output folder change
# (writer.lock aside: the lock every run takes first records who took it last).
expect() {
  local name=$1 pattern=$2
  shift 2
  local out="$tmp/$name"
  local before after
  before=$(cd "$out" && find . -type f ! -name writer.lock -exec md5sum {} + | sort)
  run "$out" 6 --set checkpoint.interval=1 "$@"
  after=$(cd "$out" && find . -type f ! -name writer.lock -exec md5sum {} + | sort)
  [ "$rc" -eq 2 ] || bad "$name: exit $rc, expected 2" "$out.log"
  grep -qE "$pattern" "$out.log" || bad "$name: message does not match '$pattern'" "$out.log"
  [ "$before" = "$after" ] || bad "$name: files changed"
}
# copy NAME: a copy of the good run (output folder with its checkpoints) as $tmp/NAME.
copy() { cp -r "$tmp/good" "$tmp/$1"; echo "$tmp/$1/checkpoints/step-00000004"; }

d=$(copy truncated); truncate -s -7 "$d/rank-00000.bin"
expect truncated "$d/rank-00000.bin: truncated" --resume auto

d=$(copy flipped)
python3 - "$d/rank-00000.bin" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 0x01; open(p, "wb").write(bytes(b))
PY
expect flipped "$d/rank-00000.bin: corrupted: CRC32C" --resume auto

d=$(copy future); sed -i 's/"format_version": 1/"format_version": 9/' "$d/manifest.json"
expect future "$d/manifest.json: format_version 9 is not readable" --resume auto

d=$(copy shape)
expect shape "$d/manifest.json: the checkpoint holds another model shape: model.hidden 32 \(this job: 64\)" \
  --resume auto --set model.hidden=64

d=$(copy unmarked); rm "$d/COMMITTED"
expect unmarked "$d/COMMITTED: commit marker is missing" --resume "$d"

d=$(copy malformed); echo '{"format_version": 1, "step": ' >"$d/manifest.json"
expect malformed "$d/manifest.json: malformed manifest" --resume "$d"

mkdir -p "$tmp/nofolder"
expect nofolder "$tmp/nofolder/none: checkpoint folder does not exist" --resume "$tmp/nofolder/none"

# A folder without a marker is skipped by --resume auto, which takes the older complete one.
d=$(copy skipped); rm "$d/COMMITTED"
run "$tmp/skipped" 6 --resume auto
[ "$rc" -eq 0 ] || bad "skipped: exit $rc" "$tmp/skipped.log"
grep -q "skipping incomplete checkpoint .*step-00000004" "$tmp/skipped.log" || bad "skipped: no skip line" "$tmp/skipped.log"
grep -q "continuing from .*step-00000002 at step 2" "$tmp/skipped.log" || bad "skipped: did not take step 2" "$tmp/skipped.log"

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
