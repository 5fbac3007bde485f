#!/usr/bin/env bash
# prepare-data's speed on JSON Lines against the same text as a plain file: ~20 MB of real text
# (test/tokenizer/make_corpus.py, invalid UTF-8 replaced so it is valid JSON) cut into
# documents of 0.5-8 KB, written once as one text file (their concatenation) and once as JSON
# Lines, plain and zstd-compressed (level 3). Each is tokenized with cl100k_base into an llm.c
# file, best of RUNS runs; the speed is MB of document text per second (the JSON's quotes and
# escapes, and the compressed sizes, are not counted), by wall time and by the CPU time the
# process used (user + system: what a machine shared with other jobs still measures). Prints:
#   prepare-data MB/s of text, N threads, wall: text X, jsonl Y (P% of text), jsonl.zst Z (Q% of text)
#   prepare-data MB per CPU second, N threads: text X, jsonl Y (P% of text), jsonl.zst Z (Q% of text)
# Needs a build and the npm package tiktoken (for the cl100k_base ranks) under BUILD/npm
# (scripts/setup.sh installs it), python3 and zstd.
#   scripts/bench_prepare.sh [BUILD_DIR] [THREADS] [MB] [RUNS]   (defaults: build, all cores, 20, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
threads=${2:-$(nproc)}
mb=${3:-20}
runs=${4:-3}
bin=$build/holmes-train
export NODE_PATH=$PWD/$build/npm/node_modules
if [ ! -x "$bin" ] || [ ! -d "$NODE_PATH/tiktoken" ] || ! command -v zstd >/dev/null; then
  echo "bench_prepare: needs $bin, zstd and the npm package tiktoken under $NODE_PATH (run scripts/setup.sh)" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 test/tokenizer/make_corpus.py corpus "$work/corpus.bin" "$mb"
node test/tokenizer/reference.cjs ranks cl100k_base "$work/cl100k_base.tiktoken"
# Documents of 0.5-8 KB cut at line ends; text.txt is their concatenation, docs.jsonl one per line.
python3 - "$work" <<'PY'
import json, random, sys
w = sys.argv[1]
text = open(f"{w}/corpus.bin", "rb").read().decode("utf-8", errors="replace")
random.seed(1)
docs, at = [], 0
while at < len(text):
    end = min(len(text), at + random.randint(500, 8000))
    nl = text.find("\n", end)
    end = len(text) if nl < 0 else nl + 1
    docs.append(text[at:end])
    at = end
with open(f"{w}/text.txt", "w", encoding="utf-8") as f:
    f.write("".join(docs))
with open(f"{w}/docs.jsonl", "w", encoding="utf-8") as f:
    for d in docs:
        f.write(json.dumps({"id": len(d), "text": d}, ensure_ascii=False) + "\n")
PY
zstd -q -3 "$work/docs.jsonl" -o "$work/docs.jsonl.zst"
bytes=$(stat -c %s "$work/text.txt")
# run INPUT: "WALL CPU" seconds of the fastest of $runs runs (by wall time, and by CPU time)
run() {
  local wall= cpu= t w c
  for _ in $(seq "$runs"); do
    t=$( { TIMEFORMAT='%R %U %S'; time "$bin" prepare-data --input "$1" --out "$work/out.bin" \
      --tokenizer "cl100k_base:$work/cl100k_base.tiktoken" --threads "$threads" >/dev/null; } 2>&1 )
    read -r w c <<<"$(awk '{ print $1, $2 + $3 }' <<<"$t")"
    wall=$(awk -v a="$wall" -v b="$w" 'BEGIN { print (a == "" || b < a) ? b : a }')
    cpu=$(awk -v a="$cpu" -v b="$c" 'BEGIN { print (a == "" || b < a) ? b : a }')
  done
  echo "$wall $cpu"
}
read -r text_w text_c <<<"$(run "$work/text.txt")"
read -r jsonl_w jsonl_c <<<"$(run "$work/docs.jsonl")"
read -r zst_w zst_c <<<"$(run "$work/docs.jsonl.zst")"
echo "corpus: $bytes bytes of text in $(wc -l < "$work/docs.jsonl") documents; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
line() {  # line WHAT TEXT_S JSONL_S ZST_S
  awk -v w="$1" -v t="$2" -v j="$3" -v z="$4" -v n="$threads" -v b="$bytes" 'BEGIN {
    t = b / 1e6 / t; j = b / 1e6 / j; z = b / 1e6 / z
    printf "prepare-data %s, %d threads: text %.1f, jsonl %.1f (%.0f%% of text), jsonl.zst %.1f (%.0f%% of text)\n",
           w, n, t, j, 100 * j / t, z, 100 * z / t }'
}
line "MB/s of text, wall" "$text_w" "$jsonl_w" "$zst_w"
line "MB of text per CPU second" "$text_c" "$jsonl_c" "$zst_c"
