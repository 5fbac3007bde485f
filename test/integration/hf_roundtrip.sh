#!/usr/bin/env bash
# Hugging Face export and import, for gpt2 and llama (each trained 150 steps on real text), with
# plain torch as the outside judge:
#   - a trained llama (4 query on 2 key/value heads, untied head) exports as LlamaForCausalLM;
#     an independent PyTorch Llama written in test/python/check_export_llama.py (no
#     transformers) loads model.safetensors and gets holmes-train eval's loss within 1e-5
#     relative, and a q/k permuted into the interleaved rotary order or a transposed o_proj
#     moves it far more;
#   - export -> eval of the Hugging Face folder gives the same loss bit for bit, for gpt2 and
#     llama, and so does the folder split into two safetensors shards + index;
#   - a fresh run --init-from the folder (single file or sharded) trains exactly as a
#     --weights-only resume of the checkpoint it was exported from: the same losses bit for bit;
#   - a folder whose config.json is another model is refused before training, naming both values.
# Usage: hf_roundtrip.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
src=$2
py=/usr/bin/python3
if ! "$py" -c "import torch, numpy" 2>/dev/null; then
  echo "HOLMES_SKIP: $py has no torch or numpy (Debian: apt install python3-torch python3-numpy)"; exit 0
fi
. "$(dirname "$0")/ckpt_common.bash"

"$bin" prepare-data --input "$src/README.md" "$src/docs/model.md" --out "$tmp/tokens.bin" >/dev/null
llama=(--set model.arch=llama --set model.kv_heads=2 --set model.ffn_hidden=128 --set model.rope_theta=10000)
small=(--set model.layers=2 --set model.hidden=64 --set model.heads=4 --set model.max_seq_len=64 --set train.seq_len=32
  --set train.micro_batch=4 --set train.global_batch=8 --set train.warmup_steps=5 --set train.lr=3e-3
  --set train.eval_interval=0 --set log.interval=20 --set data.source=files --set data.train="$tmp/tokens.bin"
  --set cluster.device_tflops=1)
# job NAME STEPS [ARGS...]: trains into $tmp/NAME; exit code in $rc.
job() {
  local name=$1 steps=$2
  shift 2
  timeout 300 "$bin" "${small[@]}" --set train.steps="$steps" --set job.output_dir="$tmp/$name" "$@" \
    >>"$tmp/$name.log" 2>&1
  rc=$?
}
# eval_exact MODEL: holmes-train eval's full-precision loss (3 batches of 4 x 48 tokens).
eval_exact() {
  "$bin" eval --checkpoint "$1" --tokens "$tmp/tokens.bin" --batch-size 4 --seq-len 48 --batches 3 \
    | awk '$1 == "loss_exact" { print $2 }'
}

for arch in gpt2 llama; do
  extra=()
  [ "$arch" = llama ] && extra=("${llama[@]}")
  job "$arch" 150 "${extra[@]}" --set checkpoint.interval=150
  [ "$rc" -eq 0 ] || { bad "$arch: training exit $rc" "$tmp/$arch.log"; continue; }
  "$bin" export --checkpoint "$tmp/$arch/final" --out "$tmp/hf-$arch" >"$tmp/export-$arch.log" 2>&1 ||
    { bad "$arch: export" "$tmp/export-$arch.log"; continue; }
  loss=$(eval_exact "$tmp/$arch/final")
  [ -n "$loss" ] || { bad "$arch: eval printed no loss_exact"; continue; }
  if [ "$arch" = llama ]; then
    "$py" "$src/test/python/check_export_llama.py" "$tmp/hf-llama" "$tmp/tokens.bin" --batch-size 4 --seq-len 48 \
      --batches 3 --loss "$loss" || fail=1
    grep -q "LlamaForCausalLM" "$tmp/export-llama.log" || bad "llama: export line" "$tmp/export-llama.log"
  fi
  "$py" "$src/test/python/check_export_llama.py" "$tmp/hf-$arch" --shard "$tmp/hf-$arch-sharded" >/dev/null || fail=1
  for folder in "hf-$arch" "hf-$arch-sharded"; do
    got=$(eval_exact "$tmp/$folder")
    [ "$got" = "$loss" ] && echo "$arch: eval of $folder: loss $got, bit for bit the trained model's" ||
      bad "$arch: eval of $folder gives $got, the trained model $loss"
  done
  # A fresh run from the folder against a weights-only resume of the exported checkpoint.
  job "$arch-resumed" 3 "${extra[@]}" --resume "$tmp/$arch/checkpoints/step-00000150" --weights-only
  [ "$rc" -eq 0 ] || bad "$arch: weights-only resume exit $rc" "$tmp/$arch-resumed.log"
  for folder in "hf-$arch" "hf-$arch-sharded"; do
    job "$arch-from-$folder" 3 "${extra[@]}" --init-from "$tmp/$folder"
    [ "$rc" -eq 0 ] || { bad "$arch: --init-from $folder exit $rc" "$tmp/$arch-from-$folder.log"; continue; }
    grep -q "init-from: started from the weights of the Hugging Face checkpoint" "$tmp/$arch-from-$folder.log" ||
      bad "$arch: no init-from line" "$tmp/$arch-from-$folder.log"
    same_losses "$tmp/$arch-resumed/metrics.jsonl" 1 3 "$tmp/$arch-from-$folder/metrics.jsonl" || fail=1
  done
done

# Another model than the folder's: refused before training, naming both values.
job mismatch 3 "${llama[@]}" --set model.kv_heads=4 --init-from "$tmp/hf-llama"
[ "$rc" -eq 2 ] && grep -q "config.json num_key_value_heads = 2, the job's model.kv_heads = 4" "$tmp/mismatch.log" ||
  bad "kv_heads mismatch: exit $rc" "$tmp/mismatch.log"
job mismatch2 3 --init-from "$tmp/hf-llama"
[ "$rc" -eq 2 ] && grep -q "config.json model_type = llama, the job's model.arch = gpt2" "$tmp/mismatch2.log" ||
  bad "arch mismatch: exit $rc" "$tmp/mismatch2.log"

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
