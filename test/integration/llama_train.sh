#!/usr/bin/env bash
# A Llama-family model (model.arch: llama) on the CPU, single process, on real text (this
# repository's README and docs, byte-level): the validation loss after 300 steps falls from a
# fresh model's ~ln(257) to well below the text's unigram entropy (so it learned context, not
# byte frequencies); an exact resume after SIGKILL (checkpoints every 5 steps, killed after step
# 13, resumed from 10: bit-identical losses); --resume of that checkpoint into a job of another
# arch or another model.kv_heads is refused naming the key; configs/llama-tiny.yaml loads and
# configs/llama3-8b-ib-roce.yaml plans Llama 3 8B's 8.03G parameters.
# Usage: llama_train.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
src=$2
. "$(dirname "$0")/ckpt_common.bash"

"$bin" prepare-data --input "$src/README.md" "$src"/docs/*.md --out "$tmp/text.bin" >"$tmp/prepare.log" 2>&1 ||
  { bad "prepare-data" "$tmp/prepare.log"; exit 1; }
llama=(--set model.arch=llama --set model.layers=2 --set model.hidden=64 --set model.heads=4 --set model.kv_heads=2
  --set model.ffn_hidden=128 --set model.rope_theta=10000 --set model.max_seq_len=64 --set train.seq_len=64
  --set train.micro_batch=8 --set train.global_batch=8 --set train.lr=3e-3 --set train.min_lr=3e-4
  --set train.warmup_steps=5 --set train.eval_steps=8 --set log.interval=50 --set data.source=files
  --set data.train="$tmp/text.bin" --set cluster.device_tflops=1 --set checkpoint.keep=10)
# lrun NAME STEPS [ARGS...]: the llama job into $tmp/NAME; exit code in $rc.
lrun() {
  local name=$1 steps=$2
  shift 2
  timeout 300 "$bin" "${llama[@]}" --set job.output_dir="$tmp/$name" --set train.steps="$steps" "$@" \
    >>"$tmp/$name.log" 2>&1
  rc=$?
}

lrun learn 300 --set train.eval_interval=300
[ "$rc" -eq 0 ] || { bad "training: exit $rc" "$tmp/learn.log"; exit 1; }
grep -q "model: Llama L=2 C=64 NH=4 KVH=2 F=128 V=257 (padded 384), rope_theta 10000, untied head" "$tmp/learn.log" ||
  bad "no Llama model line" "$tmp/learn.log"
/usr/bin/python3 - "$tmp/text.bin" "$tmp/learn/metrics.jsonl" <<'PY' || fail=1
import json, math, struct, sys, collections
raw = open(sys.argv[1], "rb").read()[256 * 4:]  # llm.c header: 256 int32
toks = struct.unpack(f"<{len(raw) // 2}H", raw)
counts = collections.Counter(toks)
unigram = -sum(c / len(toks) * math.log(c / len(toks)) for c in counts.values())
rows = [json.loads(l) for l in open(sys.argv[2])]
first = next(r["loss"] for r in rows if "loss" in r and "step_ms" in r)
val = [r["val_loss"] for r in rows if "val_loss" in r][-1]
print(f"llama on real text: first loss {first:.3f}, validation loss after 300 steps {val:.3f}, "
      f"unigram entropy of the text {unigram:.3f} nats")
assert first > 5.0, first
assert val < unigram - 0.3, (val, unigram)
PY

lrun ref 20 --set checkpoint.interval=5
[ "$rc" -eq 0 ] || { bad "uninterrupted run: exit $rc" "$tmp/ref.log"; exit 1; }
HOLMES_TEST_SIGNAL_AFTER_STEP=13:KILL lrun killed 20 --set checkpoint.interval=5
[ "$rc" -eq 137 ] || bad "killed run: exit $rc, expected 137" "$tmp/killed.log"
lrun killed 20 --set checkpoint.interval=5 --resume auto
[ "$rc" -eq 0 ] || bad "resumed run: exit $rc" "$tmp/killed.log"
grep -q "resume: continuing from .*step-00000010 at step 10" "$tmp/killed.log" || bad "did not resume at step 10" "$tmp/killed.log"
same_losses "$tmp/ref/metrics.jsonl" 1 20 "$tmp/killed/metrics.jsonl" || fail=1

ckpt="$tmp/ref/checkpoints/step-00000010"
grep -q '"arch": "llama", "kv_heads": 2, "ffn_hidden": 128' "$ckpt/manifest.json" || bad "manifest: no llama keys"
lrun gpt2 20 --set model.arch=gpt2 --set model.kv_heads=0 --set model.ffn_hidden=0 --set model.rope_theta=500000 \
  --resume "$ckpt"
[ "$rc" -eq 2 ] && grep -q "another model shape: model.arch llama (this job: gpt2)" "$tmp/gpt2.log" ||
  bad "a gpt2 job took the llama checkpoint (exit $rc)" "$tmp/gpt2.log"
lrun kv 20 --set model.kv_heads=4 --resume "$ckpt"
[ "$rc" -eq 2 ] && grep -q "another model shape: model.kv_heads 2 (this job: 4)" "$tmp/kv.log" ||
  bad "a job with other kv_heads took the checkpoint (exit $rc)" "$tmp/kv.log"

"$bin" --config "$src/configs/llama-tiny.yaml" --print-config >"$tmp/tiny.txt" 2>&1 &&
  grep -q "arch: llama" "$tmp/tiny.txt" || bad "configs/llama-tiny.yaml" "$tmp/tiny.txt"
# Llama 3 8B planned on the shipped IB + RoCE topology: 8,030,261,248 parameters.
"$bin" --config "$src/configs/llama3-8b-ib-roce.yaml" --plan-only >"$tmp/plan8b.txt" 2>&1 &&
  grep -q "^Model: llama L=32 C=4096 NH=32/KVH=8 F=14336 V=128256, 8.03G parameters" "$tmp/plan8b.txt" ||
  bad "llama3-8b plan" "$tmp/plan8b.txt"

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
