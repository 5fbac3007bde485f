#!/usr/bin/env bash
# DiLoCo convergence on this CPU (docs/diloco.md): a tiny GPT trained on real text (Vim's
# manual, /usr/share/vim/vim*/doc/*.txt: English prose and examples) tokenized by
# `holmes-train prepare-data`, as 4 workers five ways at the same tokens:
#   sync       4 replicas, one data-parallel all-reduce every step (parallel.outer sync),
#              with a checkpoint after a quarter of the steps
#   diloco     4 replicas from scratch, outer sync every 20 steps, fp32 payload
#   int8       the same with int8 payloads (per-chunk scales)
#   warm       DiLoCo's own recipe: the sync run's checkpoint after a quarter of the steps,
#              resumed with parallel.outer diloco (every replica starts from the synced weights
#              and AdamW moments, the outer momentum from zero), fp32 payload
#   warm-int8  the same with int8 payloads
# Prints the validation curves side by side and the final ratios. The runs are niced (19).
#   scripts/diloco_convergence.sh BUILD_DIR OUT_DIR [STEPS] [TOKENIZER] [SEED]
# TOKENIZER: a prepare-data --tokenizer SPEC (default bytes; gpt2:DIR makes every step ~50x
# costlier on a CPU: the 50257-row head dominates a model this small).
set -euo pipefail
build=$1
out=$2
steps=${3:-800}
tokenizer=${4:-bytes}
seed=${5:-1234}
warm=$((steps / 4 / 40 * 40))  # the switch to diloco: a quarter of the run, on a validation step
(( warm > 0 )) || { echo "STEPS must be at least 160 (the warm start is a quarter of the run, a multiple of 40)"; exit 2; }
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
  --set parallel.replicas=4 --set cluster.device_tflops=1 --set job.seed="$seed" --nproc-per-node 4)
export OMP_NUM_THREADS=1
run() {  # NAME FIRST_STEP ARGS...: skipped when OUT/NAME already holds its validation curve
  local name=$1 first=$2
  shift 2
  [ -f "$out/$name/metrics.jsonl" ] &&
    [ "$(grep -c '"val_loss"' "$out/$name/metrics.jsonl")" -ge $(((steps - first) / 40)) ] && return 0
  rm -rf "$out/$name"
  local t0=$SECONDS
  nice -n 19 "$bin" "${model[@]}" --set job.output_dir="$out/$name" "$@" >"$out/$name.log" 2>&1
  echo "$name: $((SECONDS - t0)) s ($(uptime | sed 's/.*load/load/'))"
}
diloco=(--set parallel.outer=diloco --set parallel.inner_steps=20)
run sync 0 --set parallel.outer=sync --set checkpoint.interval="$warm" --set checkpoint.keep=1000000
run diloco 0 "${diloco[@]}"
run int8 0 "${diloco[@]}" --set parallel.outer_dtype=int8
from=$out/sync/checkpoints/$(printf 'step-%08d' "$warm")
run warm "$warm" "${diloco[@]}" --resume "$from"
run warm-int8 "$warm" "${diloco[@]}" --set parallel.outer_dtype=int8 --resume "$from"
python3 - "$out" "$warm" <<'PY'
import json, sys
out, warm = sys.argv[1], int(sys.argv[2])
names = ("sync", "diloco", "int8", "warm", "warm-int8")
def curve(name):
    return {r["step"]: r["val_loss"] for r in map(json.loads, open(f"{out}/{name}/metrics.jsonl")) if "val_loss" in r}
c = {n: curve(n) for n in names}
steps = sorted(set(c["sync"]) & set(c["diloco"]) & set(c["int8"]))
print(f"| step | tokens | sync | diloco fp32 | diloco int8 | diloco fp32 from step {warm} | diloco int8 from step {warm} |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
cell = lambda n, s: f"{c[n][s]:.4f}" if s in c[n] else "(sync)"
for s in steps:
    print(f"| {s} | {s * 16 * 64} | " + " | ".join(cell(n, s) for n in names) + " |")
last = steps[-1]
r = lambda a, b: f"{c[a][last] / c[b][last]:.4f}"
print(f"\nfinal (step {last}): from scratch: diloco / sync = {r('diloco', 'sync')}, int8 / fp32 = {r('int8', 'diloco')}; "
      f"from step {warm}: diloco / sync = {r('warm', 'sync')}, int8 / fp32 = {r('warm-int8', 'warm')}")
PY
