#!/usr/bin/env bash
# configs/llama-tiny-mixture.yaml as its header says to run it: scripts/mixture_data.sh makes
# its two JSON Lines sources (gzip and zstd) from this machine's text and tokenizes them into a
# Megatron dataset and an llm.c file; the config then trains (a few steps here) on their 70/30
# mixture with document masking, logs the validation loss of each source (val_loss/prose,
# val_loss/code in metrics.jsonl) and the report page draws them. The same job on a 2-stage
# pipeline (the later stage needs the documents' positions too) gives the same losses.
# Usage: config_mixture.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
src=$(readlink -f "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/    /' "$2" | tail -30; fail=1; }
export OMP_NUM_THREADS=1
bash "$src/scripts/mixture_data.sh" "$(dirname "$bin")" "$tmp/data/mixture" 0.3 >"$tmp/data.log" 2>&1 ||
  { bad "scripts/mixture_data.sh" "$tmp/data.log"; exit 1; }
for f in prose.bin prose.idx prose.bin.tokenizer code.bin code.bin.tokenizer; do
  [ -e "$tmp/data/mixture/$f" ] || bad "mixture_data.sh wrote no $f" "$tmp/data.log"
done
cd "$tmp"
timeout 300 "$bin" --config "$src/configs/llama-tiny-mixture.yaml" --set train.steps=4 --set train.eval_interval=2 \
  --set train.eval_steps=1 --set train.seq_len=64 --set cluster.device_tflops=1 >"$tmp/run.log" 2>&1 ||
  bad "the config does not train" "$tmp/run.log"
grep -q "data: a mixture of 2 sources by token weight: prose 70.0% (1 file(s), megatron, .*code 30.0% (1 file(s), llmc" \
  "$tmp/run.log" || bad "the log does not describe the mixture" "$tmp/run.log"
grep -q "documents: masked" "$tmp/run.log" || bad "the log does not say documents are masked" "$tmp/run.log"
grep -q "validation at step 4: by source: prose [0-9.]*, code [0-9.]*" "$tmp/run.log" ||
  bad "no validation loss by source" "$tmp/run.log"
/usr/bin/python3 - "$tmp/runs/llama-tiny-mixture/metrics.jsonl" <<'PY' || fail=1
import json, math, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "val_loss" in r]
assert len(rows) == 2, f"FAIL {len(rows)} validation rows"
for r in rows:
    assert all(math.isfinite(r[k]) for k in ("val_loss", "val_loss/prose", "val_loss/code")), f"FAIL {r}"
    # val_loss is the weighted mean of the sources' (weights 0.7 and 0.3)
    want = 0.7 * r["val_loss/prose"] + 0.3 * r["val_loss/code"]
    assert abs(r["val_loss"] - want) < 1e-9, f"FAIL val_loss {r['val_loss']} != {want}"
print("validation by source:", rows[-1])
PY
"$bin" report "$tmp/runs/llama-tiny-mixture" --out "$tmp/report.html" >"$tmp/report.log" 2>&1 || bad "report" "$tmp/report.log"
grep -q 'data-series="validation loss, code"' "$tmp/report.html" || bad "the report page has no curve of the code source"
# Two pipeline stages: every stage reads the micro-batch's positions; losses as in one process.
timeout 300 "$bin" --config "$src/configs/llama-tiny-mixture.yaml" --set train.steps=4 --set train.eval_interval=2 \
  --set train.eval_steps=1 --set train.seq_len=64 --set cluster.device_tflops=1 --set job.output_dir=pp2 \
  --set parallel.pipeline=2 --set parallel.tensor=1 --set parallel.data=1 --nproc-per-node 2 >"$tmp/pp2.log" 2>&1 ||
  bad "the config on 2 pipeline stages" "$tmp/pp2.log"
/usr/bin/python3 - "$tmp/runs/llama-tiny-mixture/metrics.jsonl" "$tmp/pp2/metrics.jsonl" <<'PY' || fail=1
import json, sys
def losses(p):
    return [(r["step"], r.get("loss", r.get("val_loss"))) for r in map(json.loads, open(p)) if "loss" in r or "val_loss" in r]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert [s for s, _ in a] == [s for s, _ in b], f"FAIL rows {a} vs {b}"
worst = max(abs(x - y) / abs(x) for (_, x), (_, y) in zip(a, b))
assert worst < 1e-5, f"FAIL 2 pipeline stages: largest relative loss difference {worst:.2e}"
print(f"2 pipeline stages: losses within {worst:.1e} of one process")
PY
[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
