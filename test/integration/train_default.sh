#!/usr/bin/env bash
# Trains a smaller variant of the embedded default job and checks that the loss falls clearly
# and metrics.jsonl holds the documented keys. Usage: train_default.sh <holmes-train> <source dir>
set -euo pipefail
bin="$1"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
set +e
"$bin" --set job.output_dir="$out/run" --set train.steps=60 --set model.layers=2 --set model.hidden=64 \
  --set model.heads=2 --set train.global_batch=8 --set train.warmup_steps=5 --set train.eval_interval=30 \
  --set log.interval=20 >"$out/log.txt" 2>&1
rc=$?
set -e
cat "$out/log.txt"
[ "$rc" -eq 0 ] || { echo "FAIL: exit code $rc"; exit 1; }
m="$out/run/metrics.jsonl"
[ -s "$m" ] || { echo "FAIL: no $m"; exit 1; }
/usr/bin/python3 - "$m" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if "loss" in r]
for k in ("step", "loss", "lr", "grad_norm", "step_ms", "tokens_per_s"):
    assert all(k in r for r in steps), f"key {k} missing"
first, last = steps[0]["loss"], sum(r["loss"] for r in steps[-5:]) / 5
print(f"loss {first:.3f} -> {last:.3f}")
assert first > 5.0 and last < first - 1.0, "loss did not fall clearly"
PY
[ -s "$out/run/final/model.bin" ] || { echo "FAIL: no final/model.bin"; exit 1; }
# sample reads the run's final weights and the checkpoint of the last step alike: with one
# seed both continue the prompt the same way.
last=$(ls -d "$out"/run/checkpoints/step-* | sort | tail -1)
"$bin" sample --checkpoint "$out/run" --prompt "the " --max-tokens 24 --seed 3 >"$out/s1.txt"
"$bin" sample --checkpoint "$last" --prompt "the " --max-tokens 24 --seed 3 >"$out/s2.txt"
[ -s "$out/s1.txt" ] || { echo "FAIL: sample printed nothing"; exit 1; }
cmp -s "$out/s1.txt" "$out/s2.txt" || { echo "FAIL: sample from $last differs from final/model.bin"; exit 1; }
echo "sample: $(head -c 60 "$out/s1.txt" | tr '\n' ' ')"
echo "PASS"
