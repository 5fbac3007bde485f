#!/usr/bin/env bash
# Messages that must say what is true (issue 23), through the binary:
#   - a plan that cannot fit with the degrees on auto says the cluster is too small and by how
#     much (not "raise parallel.tensor / parallel.pipeline", which the search already tried);
#     with fixed degrees that leave devices unused it says which to raise;
#   - islands whose nodes interleave in the launch order print their real node list, as JSON;
#   - one rank, one node, one device, one island are singular;
#   - a hostlist that names one host twice in one entry says so (not "more than one entry");
#   - plan JSON byte counts are exact integers, "bytes" the sum of its parts;
#   - the save after the last step is written directly, as docs/checkpoints.md says.
# Usage: wording.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
src=$(readlink -f "$2")
. "$(dirname "$0")/ckpt_common.bash"
says() {  # says NAME LOG FRAGMENT...: every fragment in the log
  local name=$1 log=$2; shift 2
  for f in "$@"; do grep -qF -- "$f" "$log" || bad "$name: lacks '$f'" "$log"; done
}
topo=$src/configs/topologies/ib-roce-7b-topology.yaml
big=(--set model.layers=128 --set model.hidden=25600 --set model.heads=160 --set train.steps=10)

# Out of memory with every degree on auto: 64 devices of 72 GiB usable cannot hold the model.
"$bin" --plan-only --topology "$topo" "${big[@]}" --set parallel.tensor=auto --set parallel.pipeline=auto \
  --set parallel.data=auto >"$tmp/oom.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || bad "oom, auto degrees: exit $rc" "$tmp/oom.log"
says "oom, auto degrees" "$tmp/oom.log" "The cluster is too small for this model" "GiB too little" \
  "it would fit devices of at least" "train a smaller model"
! grep -q "raise parallel" "$tmp/oom.log" || bad "oom, auto degrees: advises raising degrees the search tried" "$tmp/oom.log"
# Fixed degrees that leave a copy of the model on 2 of the 64 devices: raising them is the advice.
"$bin" --plan-only --topology "$topo" "${big[@]}" --set parallel.tensor=1 --set parallel.pipeline=2 --set train.global_batch=256 \
  --set parallel.data=auto >"$tmp/oom2.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || bad "oom, fixed degrees: exit $rc" "$tmp/oom2.log"
says "oom, fixed degrees" "$tmp/oom2.log" "raise parallel.tensor = 1 and parallel.pipeline = 2"
! grep -q "too small for this model" "$tmp/oom2.log" || bad "oom, fixed degrees: blames the cluster" "$tmp/oom2.log"
echo "out-of-memory plans say what would fit"

# Interleaved islands: the text lists the nodes the JSON lists.
order=ib-node0,roce-node0,ib-node1,roce-node1,ib-node2,roce-node2,ib-node3,roce-node3
small=(--set model.layers=8 --set model.hidden=1024 --set model.heads=16 --set train.steps=10)
"$bin" --plan-only --topology "$topo" "${small[@]}" --nodes "$order" >"$tmp/plan.txt" 2>&1 || bad "plan text" "$tmp/plan.txt"
"$bin" --plan-only --topology "$topo" "${small[@]}" --nodes "$order" --format json >"$tmp/plan.json" 2>"$tmp/plan.err" \
  || bad "plan json" "$tmp/plan.err"
python3 - "$tmp/plan.txt" "$tmp/plan.json" <<'PY' || fail=1
import json, re, sys
text, plan = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
shown = {int(m.group(1)): m.group(2) for m in re.finditer(r"^  island (\d+) \(\w+\): .*\((?:nodes?) ([0-9., ]+)\)$", text, re.M)}
for isl in plan["islands"]:
    if shown.get(isl["id"]) != ", ".join(map(str, isl["nodes"])):
        sys.exit(f"FAIL island {isl['id']}: text says {shown.get(isl['id'])!r}, JSON {isl['nodes']}")
# Exact byte counts: integers, and each rank's bytes the sum of its parts.
for m in plan["memory"]:
    parts = [m[k] for k in ("params", "grads", "optimizer", "activations", "runtime")]
    if not all(type(v) is int for v in parts + [m["bytes"], m["capacity"]]) or m["bytes"] != sum(parts):
        sys.exit(f"FAIL memory of rank {m['rank']} is not exact integers: {m}")
if not all(type(v) is int for v in plan["estimate"]["bytes_per_step"].values()):
    sys.exit(f"FAIL bytes_per_step: {plan['estimate']['bytes_per_step']}")
print("interleaved islands list their nodes; byte counts are exact integers")
PY

# One of everything: singular.
cat >"$tmp/one.yaml" <<'YAML'
nodes:
  - names: solo
    devices: {kind: cuda, count: 1, name: H100-SXM, memory_gb: 80, peak_tflops: 989}
    nics: [{kind: ethernet, name: eth0, rate_gbps: 25}]
YAML
"$bin" --plan-only --topology "$tmp/one.yaml" "${small[@]}" >"$tmp/one.txt" 2>&1 || bad "one-device plan" "$tmp/one.txt"
says "one device" "$tmp/one.txt" "Plan: 1 rank = " "1 node, 1 device (node 0)"
! grep -qE "\b1 (ranks|nodes|devices)\b" "$tmp/one.txt" || bad "one device: plural for one" "$tmp/one.txt"

# One host twice in one entry, and in two entries.
printf 'nodes:\n  - names: "a[1-2],a2"\n    devices: {kind: cpu, count: 1}\n    nics: [{kind: ethernet, name: eth0, rate_gbps: 10}]\n' >"$tmp/twice.yaml"
"$bin" --plan-only --topology "$tmp/twice.yaml" "${small[@]}" >"$tmp/twice.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || bad "host twice in one entry: exit $rc" "$tmp/twice.log"
says "host twice in one entry" "$tmp/twice.log" "host 'a2' is named twice in this entry's names ('a[1-2],a2')"
entry='  - names: a1\n    devices: {kind: cpu, count: 1}\n    nics: [{kind: ethernet, name: eth0, rate_gbps: 10}]\n'
printf "nodes:\n$entry$entry" >"$tmp/two.yaml"
"$bin" --plan-only --topology "$tmp/two.yaml" "${small[@]}" >"$tmp/two.log" 2>&1
says "host in two entries" "$tmp/two.log" "host 'a1' is named by more than one node entry (nodes[0] and nodes[1])"
echo "singular forms; a host named twice is described where it is"

# The save after the last step: written directly; the one before it in the background.
run "$tmp/saves" 4 --set checkpoint.interval=2 --set checkpoint.background_write=true
[ "$rc" -eq 0 ] || bad "saves: exit $rc" "$tmp/saves.log"
grep -q "^saved checkpoint step-00000002 .*in the background" "$tmp/saves.log" || bad "interval save" "$tmp/saves.log"
grep "^saved checkpoint step-00000004 " "$tmp/saves.log" | grep -qv "background" \
  || bad "the last save says it was written in the background" "$tmp/saves.log"
echo "the last save is written directly"
[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
