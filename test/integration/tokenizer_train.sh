#!/usr/bin/env bash
# Real tokenizers end to end, as a user runs them: prepare-data with GPT-2's files and with
# cl100k_base (32-bit tokens), a tiny GPT trained on each (vocabularies 50257 and 100277) and
# a tiny Llama on the cl100k tokens,
# sample printing words of the text, eval --text equal to eval on the same text prepared,
# export writing a tokenizer.json that Hugging Face's tokenizers (npm) reads and that encodes
# like the reference (tiktoken); then the refusals: tokens of another vocabulary, a resume on
# another tokenizer's data, and bad prepare-data inputs (exit 2, the file named, nothing left).
# The vocabulary files come from the npm packages scripts/setup.sh installs (HOLMES_SKIP
# without them).
set -uo pipefail
bin=$1
src=$2
build=$(dirname "$bin")
modules=$build/npm/node_modules
ref=$src/test/tokenizer/reference.cjs
for need in tiktoken gpt-3-encoder tokenizers; do
  if ! command -v node > /dev/null || [ ! -d "$modules/$need" ]; then
    echo "HOLMES_SKIP: the npm package '$need' (or node) is missing under $modules; scripts/setup.sh installs it"
    exit 0
  fi
done
export NODE_PATH=$modules
source "$src/test/integration/check_common.bash"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir gpt2
node "$ref" gpt2-files gpt2
node "$ref" ranks cl100k_base cl100k_base.tiktoken
# Prose (the licenses, whitespace squeezed): a tiny model learns its common words quickly.
cat /usr/share/common-licenses/* | tr -s '[:space:]' ' ' > prose.txt
head -c 30000 prose.txt > held.txt

# words_of_text TEXT: how many distinct words (2+ letters) of TEXT occur in prose.txt.
words_of_text() {
  tr -cs 'A-Za-z' '\n' <<<"$1" | awk 'length($0) >= 2' | sort -u > words.txt
  tr -cs 'A-Za-z' '\n' < prose.txt | sort -u > vocab_words.txt
  comm -12 words.txt vocab_words.txt | wc -l
}

# train_one NAME SPEC VOCAB WIDTH_MAGIC: prepare, train, sample, eval, export.
train_one() {
  local name=$1 spec=$2 vocab=$3 magic=$4
  check "$name prepare-data" 0 "$bin" prepare-data --input prose.txt --out $name.bin --tokenizer "$spec" --threads 2
  has "$name prepare-data" "wrote "
  [ "$(od -An -t d4 -N 4 $name.bin | tr -d ' ')" = "$magic" ] || { echo "FAIL $name: magic is not $magic"; fail=1; }
  check "$name held-out prepare-data" 0 "$bin" prepare-data --input held.txt --out held-$name.bin --tokenizer "$spec"
  cat > $name.yaml <<YAML
model: {layers: 2, hidden: 64, heads: 2, vocab_size: $vocab, max_seq_len: 32}
train: {steps: 100, micro_batch: 8, global_batch: 8, seq_len: 32, lr: 0.01}
data: {source: files, train: [$name.bin]}
job: {output_dir: run-$name}
YAML
  check "$name training" 0 "$bin" --config $name.yaml
  has "$name training" "kept in run-$name/tokenizer"
  check "$name sample" 0 "$bin" sample --checkpoint run-$name --prompt "You may" --max-tokens 40 --temperature 0.8 \
    --top-k 40 --seed 1
  echo "$name sample: $out"
  local words
  words=$(words_of_text "$out")
  [ "$words" -ge 5 ] || { echo "FAIL $name sample: only $words distinct words of the text"; fail=1; }
  check "$name sample from the checkpoint folder" 0 "$bin" sample --checkpoint run-$name/checkpoints/step-00000100 \
    --prompt "the" --max-tokens 5 --temperature 0
  check "$name eval --text" 0 "$bin" eval --checkpoint run-$name --text held.txt --batches 3 --batch-size 2
  local text_loss tokens_loss
  text_loss=$(grep '^loss' <<<"$out")
  check "$name eval --tokens" 0 "$bin" eval --checkpoint run-$name --tokens held-$name.bin --batches 3 --batch-size 2
  tokens_loss=$(grep '^loss' <<<"$out")
  [ -n "$text_loss" ] && [ "$text_loss" = "$tokens_loss" ] ||
    { echo "FAIL $name: eval --text gave '$text_loss', eval --tokens of the same text '$tokens_loss'"; fail=1; }
  check "$name export" 0 "$bin" export --checkpoint run-$name --out export-$name
  has "$name export" "export-$name/tokenizer.json"
}

train_one gpt2 gpt2:gpt2 50257 20240520
train_one cl100k cl100k_base:cl100k_base.tiktoken 100277 20240801

# A tiny Llama on the cl100k tokens: trains, samples words, evaluates text.
cat > llama.yaml <<YAML
model: {arch: llama, layers: 2, hidden: 64, heads: 2, vocab_size: 100277, max_seq_len: 32}
train: {steps: 60, micro_batch: 8, global_batch: 8, seq_len: 32, lr: 0.01}
data: {source: files, train: [cl100k.bin]}
job: {output_dir: run-llama}
YAML
check "llama training" 0 "$bin" --config llama.yaml
check "llama sample" 0 "$bin" sample --checkpoint run-llama --prompt "You may" --max-tokens 30 --temperature 0.8 \
  --top-k 40 --seed 1
echo "llama sample: $out"
[ "$(words_of_text "$out")" -ge 3 ] || { echo "FAIL llama sample: too few words of the text"; fail=1; }
check "llama eval --text" 0 "$bin" eval --checkpoint run-llama --text held.txt --batches 2 --batch-size 2
has "llama eval --text" "tokenized with cl100k_base"

# The exported tokenizer.json, read by Hugging Face's tokenizers, encodes like tiktoken.
for pair in gpt2:gpt2 cl100k:cl100k_base; do
  name=${pair%%:*} enc=${pair##*:}
  node "$ref" hf export-$name/tokenizer.json held.txt hf.tok hf.txt &&
    node "$ref" tiktoken $enc held.txt tt.tok tt.txt &&
    cmp -s hf.tok tt.tok && echo "ok   $name: Hugging Face reads the export's tokenizer.json and encodes like tiktoken" ||
    { echo "FAIL $name: the export's tokenizer.json does not load in Hugging Face or encodes otherwise"; fail=1; }
done

# Another vocabulary's tokens, or a resume on another tokenizer's data: refused naming both.
check "eval on tokens of another tokenizer" 2 "$bin" eval --checkpoint run-cl100k --tokens held-gpt2.bin
has "eval on tokens of another tokenizer" "held-gpt2.bin"
has "eval on tokens of another tokenizer" "cl100k_base"
# GPT-2's files read with merges' rules: another tokenizer (hash) of the same 50257 ids.
check "prepare-data with merges' rules" 0 "$bin" prepare-data --input prose.txt --out merges.bin \
  --tokenizer gpt2/encoder.json
check "resume on another tokenizer's data" 2 "$bin" --config gpt2.yaml --set data.train=[merges.bin] --resume auto
has "resume on another tokenizer's data" "trained on tokens of gpt2"
has "resume on another tokenizer's data" "GPT-2 vocab gpt2/encoder.json"
check "model vocabulary smaller than the data's tokenizer" 2 "$bin" --config gpt2.yaml --set data.train=[cl100k.bin] \
  --set job.output_dir=run-small
has "model vocabulary smaller than the data's tokenizer" "100277 ids"

# Bad prepare-data inputs: exit 2, the file and the problem named, nothing written.
bad() {  # bad DESCRIPTION FRAGMENT ARGS...
  local what=$1 fragment=$2
  shift 2
  rm -rf out.bin out.bin.tokenizer
  check "$what" 2 "$bin" prepare-data "$@"
  has "$what" "$fragment"
  if [ -e out.bin ] || [ -e out.bin.tokenizer ] || ls ./*.tmp-* > /dev/null 2>&1; then
    echo "FAIL $what: left files behind"; ls; fail=1
  fi
}
mkdir broken && echo '{"model": {"type": "BPE",' > broken/tokenizer.json
mkdir mismatch && cp gpt2/encoder.json mismatch/ && { head -3 gpt2/vocab.bpe; echo "q zzzz"; } > mismatch/vocab.bpe
mkdir adir
bad "missing tokenizer file" "nope.tiktoken" --input prose.txt --out out.bin --tokenizer cl100k_base:nope.tiktoken
bad "malformed tokenizer.json" "not valid JSON" --input prose.txt --out out.bin --tokenizer broken/tokenizer.json
bad "merges not matching the vocabulary" "vocab.bpe:4" --input prose.txt --out out.bin --tokenizer mismatch/encoder.json
bad "an input that is a folder" "adir' is a folder" --input adir --out out.bin --tokenizer gpt2:gpt2
bad "an output that is an input" "is also an --input" --input prose.txt --out prose.txt --tokenizer gpt2:gpt2
bad "a missing input" "none.txt' does not exist" --input none.txt --out out.bin
[ "$(head -c 20 prose.txt | wc -c)" -eq 20 ] || { echo "FAIL the input was damaged"; fail=1; }
[ "$fail" -eq 0 ] && echo "tokenizer_train: all checks passed"
exit "$fail"
