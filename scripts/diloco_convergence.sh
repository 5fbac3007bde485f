#!/usr/bin/env bash
# DiLoCo convergence on this CPU (docs/diloco.md): a tiny GPT trained on real text (Vim's
# manual, /usr/share/vim/vim*/doc/*.txt: English prose and examples) tokenized by
# `holmes-train prepare-data`, as 4 workers three ways at the same tokens:
#   sync     4 replicas, one data-parallel all-reduce every step (parallel.outer sync)
#   diloco   4 replicas, outer sync every 20 steps, fp32 payload
#   int8     the same with int8 payloads (per-chunk scales)
# Prints the validation curves side by side and the final ratios.
#   scripts/diloco_convergence.sh BUILD_DIR OUT_DIR [STEPS] [TOKENIZER]
# TOKENIZER: a prepare-data --tokenizer SPEC (default bytes; gpt2:DIR makes every step ~50x
# costlier on a CPU: the 50257-row head dominates a model this small).
set -euo pipefail
build=$1
out=$2
steps=${3:-800}
tokenizer=${4:-bytes}
bin=$build/holmes-train
mkdir -p "$out"
docs=(/usr/share/vim/vim*/doc/*.txt)
[ -e "${docs[0]}" ] || { echo "no Vim manual under /usr/share/vim (apt-get install vim-runtime)"; exit 2; }
# Held out: the version notes (every 10th file) for validation; the rest trains.
train=() valid=()
for i in "${!docs[@]}"; do
  if (( i % 10 == 9 )); then valid+=("${docs[$i]}"); else train+=("${docs[$i]}"); fi
done
[ -f "$out/train.bin" ] || "$bin" prepare-data --input "${train[@]}" --out "$out/train.bin" --tokenizer "$tokenizer"
[ -f "$out/valid.bin" ] || "$bin" prepare-data --input "${valid[@]}" --out "$out/valid.bin" --tokenizer "$tokenizer"
vocab=257
[ "$tokenizer" = bytes ] || vocab=50257
model=(--set model.layers=2 --set model.hidden=64 --set model.heads=4 --set model.vocab_size=$vocab
  --set model.max_seq_len=64 --set train.seq_len=64 --set train.micro_batch=4 --set train.global_batch=16
  --set train.steps="$steps" --set train.lr=3e-3 --set train.min_lr=3e-4 --set train.warmup_steps=20
  --set train.eval_interval=40 --set train.eval_steps=16 --set log.interval=20 --set checkpoint.interval=0
  --set data.source=files --set data.train="$out/train.bin" --set data.valid="$out/valid.bin"
  --set parallel.replicas=4 --set cluster.device_tflops=1 --nproc-per-node 4)
export OMP_NUM_THREADS=1
run() {  # NAME ARGS...
  local name=$1
  shift
  [ -f "$out/$name/metrics.jsonl" ] && grep -q '"val_loss"' "$out/$name/metrics.jsonl" &&
    [ "$(grep -c '"val_loss"' "$out/$name/metrics.jsonl")" -ge $((steps / 40)) ] && return 0
  rm -rf "$out/$name"
  local t0=$SECONDS
  "$bin" "${model[@]}" --set job.output_dir="$out/$name" "$@" >"$out/$name.log" 2>&1
  echo "$name: $((SECONDS - t0)) s ($(uptime | sed 's/.*load/load/'))"
}
run sync --set parallel.outer=sync
run diloco --set parallel.outer=diloco --set parallel.inner_steps=20
run int8 --set parallel.outer=diloco --set parallel.inner_steps=20 --set parallel.outer_dtype=int8
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def curve(name):
    return {r["step"]: r["val_loss"] for r in map(json.loads, open(f"{out}/{name}/metrics.jsonl")) if "val_loss" in r}
c = {n: curve(n) for n in ("sync", "diloco", "int8")}
steps = sorted(set(c["sync"]) & set(c["diloco"]) & set(c["int8"]))
print("| step | tokens | sync | diloco H=20 fp32 | diloco H=20 int8 |")
print("| ---: | ---: | ---: | ---: | ---: |")
for s in steps:
    print(f"| {s} | {s * 16 * 64} | {c['sync'][s]:.4f} | {c['diloco'][s]:.4f} | {c['int8'][s]:.4f} |")
last = steps[-1]
print(f"\nfinal (step {last}): diloco / sync = {c['diloco'][last] / c['sync'][last]:.4f}, "
      f"int8 / fp32 = {c['int8'][last] / c['diloco'][last]:.4f}")
PY
