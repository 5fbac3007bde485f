#!/usr/bin/env bash
# Trains a tiny model, exports it as Hugging Face GPT-2 and checks with plain torch (Debian's
# python3-torch, no transformers) that the export has GPT-2's names, shapes and config.json and
# gives the loss `holmes-train eval` reports on the same sequences (1e-4 relative). Both inputs:
# the run's final weights and its checkpoints (a step folder, and checkpoint.dir = newest), and
# the checkpoint of a tp2 x pp2 job.
# Also checks the --out folder rules. Usage: export.sh <holmes-train> <source dir>
set -euo pipefail
bin="$1"
src="$2"
py=/usr/bin/python3
if ! "$py" -c "import torch, numpy" 2>/dev/null; then
  echo "HOLMES_SKIP: $py has no torch or numpy (Debian: apt install python3-torch python3-numpy)"; exit 0
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# A tiny model trained long enough that its weights are no longer near their init, so a wrong
# layout would change the loss by far more than the tolerance.
set +e
"$bin" --set job.output_dir="$out/run" --set train.steps=40 --set model.layers=2 --set model.hidden=64 \
  --set model.heads=2 --set model.max_seq_len=64 --set train.seq_len=32 --set train.global_batch=8 \
  --set train.warmup_steps=5 --set train.eval_interval=0 --set log.interval=20 \
  --set checkpoint.interval=20 >"$out/train.txt" 2>&1
rc=$?
set -e
[ "$rc" -eq 0 ] || { cat "$out/train.txt"; echo "FAIL: training exited with $rc"; exit 1; }

"$bin" prepare-data --input "$src/README.md" "$src/docs/export.md" --out "$out/tokens.bin"

check_input() {  # $1: what --checkpoint gets, $2: export folder
  "$bin" export --checkpoint "$1" --out "$2"
  "$bin" eval --checkpoint "$1" --tokens "$out/tokens.bin" --batch-size 4 --seq-len 48 --batches 3 | tee "$out/eval.txt"
  loss="$(awk '$1 == "loss" { print $2 }' "$out/eval.txt")"
  [ -n "$loss" ] || { echo "FAIL: eval printed no 'loss <value>' line"; exit 1; }
  "$py" "$src/test/python/check_export.py" "$2" "$out/tokens.bin" --batch-size 4 --seq-len 48 --batches 3 \
    --loss "$loss"
}
check_input "$out/run/final" "$out/hf"
ckpt="$out/run/checkpoints"
[ -f "$ckpt/step-00000020/manifest.json" ] && [ -f "$ckpt/step-00000040/manifest.json" ] \
  || { ls -R "$out/run"; echo "FAIL: no checkpoints step-00000020 and step-00000040 in $ckpt"; exit 1; }
check_input "$ckpt/step-00000020" "$out/hf20"  # other weights than the final ones
# The last checkpoint holds the final weights: its export is the same bytes. checkpoint.dir
# itself stands for its newest complete checkpoint.
"$bin" export --checkpoint "$ckpt" --out "$out/hf40" | grep -q "step-00000040"
cmp "$out/hf/model.safetensors" "$out/hf40/model.safetensors" && cmp "$out/hf/config.json" "$out/hf40/config.json" \
  || { echo "FAIL: exports of final/model.bin and of the step-40 checkpoint differ"; exit 1; }
if cmp -s "$out/hf/model.safetensors" "$out/hf20/model.safetensors"; then
  echo "FAIL: the step-20 export equals the final one"; exit 1
fi

# A checkpoint saved by a tp2 x pp2 job (4 local workers, no final/model.bin) is reassembled
# from its slices: its export must also give the loss holmes-train computes.
set +e
"$bin" --nproc-per-node 4 --set job.output_dir="$out/dist" --set train.steps=30 --set model.layers=2 \
  --set model.hidden=64 --set model.heads=2 --set model.max_seq_len=64 --set train.seq_len=32 \
  --set train.global_batch=8 --set train.micro_batch=2 --set train.warmup_steps=5 --set train.eval_interval=0 \
  --set checkpoint.interval=30 --set parallel.tensor=2 --set parallel.pipeline=2 --set parallel.data=1 \
  >"$out/dist.txt" 2>&1
rc=$?
set -e
[ "$rc" -eq 0 ] || { cat "$out/dist.txt"; echo "FAIL: the tp2 x pp2 job exited with $rc"; exit 1; }
check_input "$out/dist/checkpoints/step-00000030" "$out/hf_dist"

# Re-exporting into a previous export replaces it; a folder with other files is refused (exit 2).
"$bin" export --checkpoint "$out/run/final" --out "$out/hf" | grep -q "replaced" \
  || { echo "FAIL: re-export did not say it replaced the previous export"; exit 1; }
mkdir "$out/other" && echo keep >"$out/other/notes.txt"
set +e
"$bin" export --checkpoint "$out/run/final" --out "$out/other" 2>"$out/err.txt"
rc=$?
set -e
cat "$out/err.txt"
[ "$rc" -eq 2 ] && grep -q "notes.txt" "$out/err.txt" || { echo "FAIL: non-empty --out: exit $rc"; exit 1; }
[ "$(cat "$out/other/notes.txt")" = keep ] && [ ! -e "$out/other/model.safetensors" ] \
  || { echo "FAIL: the refused folder was changed"; exit 1; }
echo "PASS"
