#!/usr/bin/env bash
# holmes-train calibrate on this CPU: one process writes a compute table of the job's model that
# --plan-only then prices with (its compute "measured"); two workers also measure the
# collectives between them, which price the tensor-parallel sums; bad options exit 2.
# Usage: calibrate.sh <holmes-train> <source dir>
set -u
bin=$1
tmp=$(mktemp -d)
source "$(dirname "$0")/dist_common.bash"
job=("${tiny_job[@]}" --set cluster.device_tflops=0 --set train.recompute=none --set parallel.schedule=1f1b)
timeout 300 "$exe" calibrate "${job[@]}" --out "$tmp/cal.yaml" --reps 1 --tp 1 >"$tmp/one.log" 2>&1 \
  || bad "calibrate, one process: exit $?" "$tmp/one.log"
grep -q "^calibrate: layer tp 1 micro-batch 2 T 32 recompute none: F " "$tmp/one.log" || bad "no layer line" "$tmp/one.log"
/usr/bin/python3 - "$tmp/cal.yaml" <<'PY' || bad "calibration file" "$tmp/cal.yaml"
import sys, yaml
cal = yaml.safe_load(open(sys.argv[1]))
assert cal["format"] == "holmes-calibration/2", cal["format"]
assert cal["device"]["kind"] == "cpu" and cal["device"]["date"], cal["device"]
[table] = cal["tables"]
assert table["device"]["kind"] == "cpu" and table["precision"] == "fp32", table
assert table["model"] == "gpt2 L=6 C=64 NH=4 KVH=4 F=256 V=257", table["model"]
modes = {(l["tp"], l["micro_batch"], l["recompute"]) for l in table["layers"]}
assert modes == {(1, 2, "none"), (1, 2, "selective"), (1, 2, "full")}, modes
assert all(l["forward_ms"] > 0 and l["backward_all_ms"] > 0 for l in table["layers"]), table["layers"]
assert table["embedding"] and table["head"] and table["head"][0]["forward_ms"] >= 0, table  # edges: a difference, at least 0
assert {g["name"] for g in table["gemms"]} == {"qkv", "attn_out", "mlp_in", "mlp_out", "head"}, table["gemms"]
assert table["optimizer_ns_per_param"] > 0 and table["copy_gbps"] > 0, table
assert "collectives" not in cal, cal.get("collectives")
PY
"$exe" "${job[@]}" --plan-only --format json --set cluster.calibration="$tmp/cal.yaml" >"$tmp/plan.json" 2>"$tmp/plan.err" \
  || bad "--plan-only with the table: exit $?" "$tmp/plan.err"
/usr/bin/python3 - "$tmp/plan.json" <<'PY' || bad "--plan-only does not price compute from the table" "$tmp/plan.json"
import json, sys
plan = json.load(open(sys.argv[1]))
src = plan["estimate"]["sources"]
assert src["compute"].startswith("measured (calibrate table"), src
assert src["update"] == "measured (calibrate table)", src
PY
"$exe" "${job[@]}" --plan-only --set cluster.calibration="$tmp/cal.yaml" 2>&1 | grep -q "figures: compute measured (calibrate table" \
  || bad "--plan-only text does not say compute was measured"
# Two workers: the collectives between them, through Gloo groups; the tensor-parallel sums of a
# tp-2 plan then come from the curve.
timeout 300 "$exe" calibrate "${job[@]}" --out "$tmp/cal2.yaml" --reps 1 --tp 1 2 --nproc-per-node 2 \
  >"$tmp/two.log" 2>&1 || bad "calibrate, two workers: exit $?" "$tmp/two.log"
/usr/bin/python3 - "$tmp/cal2.yaml" <<'PY' || bad "two-worker calibration file" "$tmp/cal2.yaml"
import sys, yaml
cal = yaml.safe_load(open(sys.argv[1]))
ops = {(c["link"], c["transport"], c["op"], c["ranks"]) for c in cal["collectives"]}
for op in ("all_reduce", "reduce_scatter", "all_gather", "send_recv"):
    assert ("intra-node", "gloo", op, 2) in ops, ops
assert all(c["bus_gbps"] > 0 and len(c["points"]) >= 4 for c in cal["collectives"]), cal["collectives"]
assert {l["tp"] for l in cal["tables"][0]["layers"]} == {1, 2}, cal["tables"][0]["layers"]
PY
"$exe" "${job[@]}" --plan-only --format json --nproc-per-node 2 --set parallel.tensor=2 --set parallel.pipeline=1 \
  --set parallel.data=1 --set cluster.calibration="$tmp/cal2.yaml" >"$tmp/plan2.json" 2>"$tmp/plan2.err" \
  || bad "--plan-only tp 2 with the curves: exit $?" "$tmp/plan2.err"
/usr/bin/python3 - "$tmp/plan2.json" <<'PY' || bad "the tensor sums are not priced from the curve" "$tmp/plan2.json"
import json, sys
src = json.load(open(sys.argv[1]))["estimate"]["sources"]
assert src["tensor comm"] == "measured (calibrate curves)", src
assert src["compute"].startswith("measured (calibrate table"), src
PY
no_leftovers "calibrate"
# Bad input: exit 2 naming the option.
"$exe" calibrate "${job[@]}" --reps 1 >/dev/null 2>"$tmp/noout.err"
[ $? -eq 2 ] && grep -q -- "--out FILE is required" "$tmp/noout.err" || bad "no --out" "$tmp/noout.err"
"$exe" calibrate "${job[@]}" --out "$tmp/x.yaml" --tp 3 >/dev/null 2>"$tmp/tp3.err"
[ $? -eq 2 ] && grep -q -- "--tp: 3 does not split the model" "$tmp/tp3.err" || bad "--tp 3" "$tmp/tp3.err"
finish
