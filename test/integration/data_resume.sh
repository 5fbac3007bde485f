#!/usr/bin/env bash
# The loader's position through the binary, with real processes (local launcher): a job on a
# two-source mixture (a Megatron dataset and an llm.c file made by prepare-data from JSON Lines)
# with document masking trains 3 steps under data-parallel 2 (global batch 8), resumes under
# data-parallel 4 with another micro-batch and global batch (16) for 2 steps, then under 2
# replicas x data-parallel 2 (global batch 8) for 2 more. Every sequence each process reads is
# traced (HOLMES_TEST_DATA_TRACE): together the three runs read stream sequences 0..71 once
# each, every one the same tokens (source, file, offset) as a single process reading the stream
# straight, and no chunk of a source twice (one epoch). The checkpoints record the position; a
# checkpoint without it resumes where its tokens_seen says, and says so.
# Usage: data_resume.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
. "$(dirname "$0")/ckpt_common.bash"
export HOLMES_LAUNCH_GRACE_S=2

/usr/bin/python3 - "$tmp" <<'PY'
import json, random, sys
random.seed(5)
words = "the a cat dog sat ran on in far near blue red one two".split()
for name, n in (("web", 900), ("code", 600)):
    with open(f"{sys.argv[1]}/{name}.jsonl", "w") as f:
        for _ in range(n):
            f.write(json.dumps({"text": " ".join(random.choice(words) for _ in range(random.randint(3, 40)))}) + "\n")
PY
"$bin" prepare-data --input "$tmp/web.jsonl" --out "$tmp/web.idx" >"$tmp/prep.log" 2>&1 || bad "prepare-data web" "$tmp/prep.log"
"$bin" prepare-data --input "$tmp/code.jsonl" --out "$tmp/code.bin" >>"$tmp/prep.log" 2>&1 || bad "prepare-data code" "$tmp/prep.log"

data=(--set data.source=files --set "data.train=[0.7, $tmp/web, 0.3, $tmp/code.bin]" --set data.document_mask=true
  --set checkpoint.interval=1000)
# step RUN STEPS ARGS...: the job traced into $tmp/trace-RUN; exit code in $rc
step() {
  local name=$1 steps=$2
  shift 2
  mkdir -p "$tmp/trace-$name"
  HOLMES_TEST_DATA_TRACE="$tmp/trace-$name" timeout 180 "$bin" "${tiny[@]}" "${data[@]}" \
    --set job.output_dir="$tmp/run" --set train.steps="$steps" "$@" >>"$tmp/$name.log" 2>&1
  rc=$?
}
step dp2 3 --nproc-per-node 2 --set parallel.data=2 --set train.micro_batch=2 --set train.global_batch=8
[ "$rc" -eq 0 ] || bad "dp2: exit $rc" "$tmp/dp2.log"
grep -q '"data_position": {"sequences": 24, "seq_len": 32, "step": 3}' "$tmp/run/checkpoints/step-00000003/manifest.json" ||
  bad "checkpoint 3 does not record 24 sequences read" "$tmp/run/checkpoints/step-00000003/manifest.json"
step dp4 5 --nproc-per-node 4 --set parallel.data=4 --set train.micro_batch=1 --set train.global_batch=16 --resume auto
[ "$rc" -eq 0 ] || bad "dp4 resume: exit $rc" "$tmp/dp4.log"
grep -q '"sequences": 56,' "$tmp/run/checkpoints/step-00000005/manifest.json" || bad "checkpoint 5 does not record 56"
step replicas 7 --nproc-per-node 4 --set parallel.data=2 --set parallel.replicas=2 --set train.micro_batch=2 \
  --set train.global_batch=8 --resume auto
[ "$rc" -eq 0 ] || bad "replicas 2 resume: exit $rc" "$tmp/replicas.log"
# The same stream read straight by one process: 9 steps of 8.
mkdir -p "$tmp/trace-single"
HOLMES_TEST_DATA_TRACE="$tmp/trace-single" timeout 180 "$bin" "${tiny[@]}" "${data[@]}" --set job.output_dir="$tmp/single" \
  --set train.steps=9 --set train.micro_batch=8 --set train.global_batch=8 >"$tmp/single.log" 2>&1 ||
  bad "single process" "$tmp/single.log"

/usr/bin/python3 - "$tmp" <<'PY' || fail=1
import glob, sys
tmp = sys.argv[1]
def read(run):
    rows = []
    for path in glob.glob(f"{tmp}/trace-{run}/trace-*.txt"):
        rows += [tuple(map(int, line.split())) for line in open(path)]
    return rows
resumed = read("dp2") + read("dp4") + read("replicas")
single = {r[0]: r[1:] for r in read("single")}
index = sorted(r[0] for r in resumed)
assert index == list(range(72)), f"FAIL stream sequences read: {index[:30]}... ({len(index)}, expected 0..71 once each)"
assert sorted(single) == list(range(72)), f"FAIL the single run read {sorted(single)[:10]}..."
for i, *where in resumed:
    assert tuple(where) == single[i], f"FAIL sequence {i}: read {where}, the straight stream has {single[i]}"
chunks = [tuple(w) for w in single.values()]
assert len(set(chunks)) == len(chunks), "FAIL a chunk of a source was read twice in one epoch"
by_source = [sum(1 for c in chunks if c[0] == s) for s in (0, 1)]
print(f"stream 0..71 read once across dp2 -> dp4 -> 2 replicas x dp2, as one process reads it; by source {by_source}")
PY

# A checkpoint saved before positions were recorded: its tokens_seen places the stream.
ckpt="$tmp/run/checkpoints/step-00000007"
/usr/bin/python3 - "$ckpt/manifest.json" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
s = re.sub(r'  "data_position": \{[^}]*\},\n', '', s)
open(p, "w").write(s)
PY
step old 8 --nproc-per-node 2 --set parallel.data=2 --set train.micro_batch=2 --set train.global_batch=8 --resume auto
[ "$rc" -eq 0 ] || bad "resume from a manifest without data_position: exit $rc" "$tmp/old.log"
grep -q "records no data position (an older checkpoint): the data stream continues at sequence 72" "$tmp/old.log" ||
  bad "the old checkpoint's resume does not say where the stream continues" "$tmp/old.log"
got=$(cat "$tmp"/trace-old/trace-*.txt | awk '{print $1}' | sort -n | tr '\n' ' ')
[ "$got" = "72 73 74 75 76 77 78 79 " ] || bad "after an old checkpoint the stream read '$got', expected 72..79"

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
