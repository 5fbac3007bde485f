#!/usr/bin/env bash
# A Llama-family model (model.arch: llama, 4 query heads on 2 key/value heads, untied head)
# under tp2 x pp2 x dp2 (8 processes through the local launcher, Gloo over loopback): every
# step's loss and the validation losses at steps 10 and 20 within 1e-4 (relative) of the
# single process, as dist_equivalence.sh requires of GPT-2; its step-10 checkpoint (saved by
# tp2 x pp2 x dp2) resumes under tp1 x pp4 with steps 11..20 within 1e-5 of the run that saved it.
# Usage: llama_parallel.sh <holmes-train> <source dir>
set -u
bin=$1
tmp=$(mktemp -d)
source "$(dirname "$0")/dist_common.bash"
llama=(--set model.arch=llama --set model.kv_heads=2 --set model.ffn_hidden=128 --set model.rope_theta=10000
  --set model.layers=4 --set train.eval_interval=10 --set train.eval_steps=1 --set checkpoint.interval=10)

run() {  # run NAME NPROC [ARGS...]: trains into $tmp/NAME, log in $tmp/NAME.log
  local name=$1 nproc=$2
  shift 2
  local launch=()
  [ "$nproc" -gt 1 ] && launch=(--nproc-per-node "$nproc")
  timeout 180 "$exe" "${tiny_job[@]}" "${llama[@]}" --set job.output_dir="$tmp/$name" "$@" "${launch[@]}" \
    >"$tmp/$name.log" 2>&1
  local code=$?
  [ "$code" -eq 0 ] || { bad "$name: exit $code" "$tmp/$name.log"; return 1; }
}

# close REF NAME FIRST TOL: steps FIRST..20 (and validations from FIRST on) of NAME against REF.
close() {
  /usr/bin/python3 - "$tmp/$1/metrics.jsonl" "$tmp/$2/metrics.jsonl" "$2" "$3" "$4" <<'PY' || fail=1
import json, sys
ref_path, got_path, name, first, tol = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
def series(path, key):
    return {r["step"]: r[key] for r in map(json.loads, open(path)) if key in r and "step" in r}
worst = 0.0
for key, steps in (("loss", range(first, 21)), ("val_loss", [s for s in (10, 20) if s >= first])):
    ref, got = series(ref_path, key), series(got_path, key)
    for s in steps:
        assert s in ref and s in got, f"FAIL {name}: no {key} at step {s}"
        rel = abs(got[s] - ref[s]) / abs(ref[s])
        worst = max(worst, rel)
        assert rel <= tol, f"FAIL {name}: step {s} {key} {got[s]:.6f} vs {ref[s]:.6f} (relative {rel:.2e} > {tol})"
print(f"{name}: steps {first}..20, largest relative difference {worst:.2e}")
PY
}

run single 1 || finish
grep -q "model: Llama L=4 C=64 NH=4 KVH=2 F=128" "$tmp/single.log" || bad "single: no Llama model line" "$tmp/single.log"
run tp2pp2dp2 8 --set parallel.tensor=2 --set parallel.pipeline=2 --set parallel.data=2 && close single tp2pp2dp2 1 1e-4
grep -q "Plan: 8 ranks = tensor 2 x pipeline 2 x data 2" "$tmp/tp2pp2dp2.log" ||
  bad "tp2pp2dp2: rank 0 did not print the plan" "$tmp/tp2pp2dp2.log"
ckpt="$tmp/tp2pp2dp2/checkpoints/step-00000010"
[ -f "$ckpt/COMMITTED" ] || bad "tp2pp2dp2: no checkpoint at step 10"
run pp4 4 --set parallel.tensor=1 --set parallel.pipeline=4 --set parallel.data=1 --resume "$ckpt" &&
  close tp2pp2dp2 pp4 11 1e-5
grep -q "continuing from .*step-00000010 at step 10 .*another plan: resharded" "$tmp/pp4.log" ||
  bad "pp4: no resharding line" "$tmp/pp4.log"
no_leftovers "llama"
finish
