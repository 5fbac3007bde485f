#!/usr/bin/env bash
# Tokenizer speed: holmes-train's cl100k_base on one thread and on every core against OpenAI's
# tiktoken (npm, WebAssembly) on the same ~20 MB of real text (test/tokenizer/make_corpus.py),
# encoding held in memory, best of runs of ~5 s each. Prints one line:
#   tokenizer: MB/s holmes 1-thread X, N-thread Y, tiktoken-wasm Z, ratio X/Z
# Needs a build (scripts/setup.sh: also installs the npm packages into BUILD/npm).
#   scripts/bench_tokenizer.sh [BUILD_DIR] [THREADS]     (defaults: build, all cores)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
threads=${2:-$(nproc)}
tool=$build/holmes-tokenizer-tool
export NODE_PATH=$PWD/$build/npm/node_modules
if [ ! -x "$tool" ] || [ ! -d "$NODE_PATH/tiktoken" ]; then
  echo "bench_tokenizer: needs $tool and the npm package tiktoken under $NODE_PATH (run scripts/setup.sh)" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 test/tokenizer/make_corpus.py corpus "$work/corpus.txt" 20
node test/tokenizer/reference.cjs ranks cl100k_base "$work/cl100k_base.tiktoken"
# tiktoken encodes what node read (invalid UTF-8 as U+FFFD): give both those same bytes.
node test/tokenizer/reference.cjs tiktoken cl100k_base "$work/corpus.txt" "$work/ref.tok" "$work/text.txt"
read -r _ bytes _ _ _ one _ many < <("$tool" bench "cl100k_base:$work/cl100k_base.tiktoken" "$work/text.txt" "$threads")
read -r _ wasm < <(node test/tokenizer/reference.cjs bench cl100k_base "$work/text.txt")
echo "corpus: $bytes bytes of text from this machine; $threads threads; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v x="$one" -v y="$many" -v z="$wasm" -v n="$threads" \
  'BEGIN { printf "tokenizer: MB/s holmes 1-thread %.1f, %d-thread %.1f, tiktoken-wasm %.1f, ratio X/Z %.1f\n", x, n, y, z, x / z }'
