#!/usr/bin/env bash
# Two nodes played by one machine: four torchrun-style ranks, two per "node", the nodes named
# by HOLMES_NODE_NAME. The plan then has 2 nodes; tensor-parallel groups stay inside a node
# (loopback) while pipeline groups cross nodes and bind to the plan's Ethernet interface. The
# losses match the single-process run within 1e-4 (relative).
# Usage: dist_nodes.sh <holmes-train> <source dir>
set -u
bin=$1
tmp=$(mktemp -d)
source "$(dirname "$0")/dist_common.bash"
skip_without_ethernet
timeout 60 "$exe" "${tiny_job[@]}" --set job.output_dir="$tmp/single" >"$tmp/single.log" 2>&1 || bad "single" "$tmp/single.log"
port=$(free_port)
pids=()
for r in 0 1 2 3; do
  RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    HOLMES_NODE_NAME=fake-node$((r / 2)) HOLMES_JOB_TOKEN=nodes-test timeout 120 "$exe" "${tiny_job[@]}" \
    --set parallel.tensor=2 --set parallel.pipeline=2 --set parallel.data=1 --set cluster.timeout_s=30 \
    --set job.output_dir="$tmp/nodes" >"$tmp/nodes.$r.log" 2>&1 &
  pids+=($!)
done
for r in 0 1 2 3; do
  wait "${pids[$r]}" || bad "rank $r: exit $?" "$tmp/nodes.$r.log"
done
log=$tmp/nodes.0.log
grep -q "node 0 .*fake-node0" "$log" && grep -q "node 1 .*fake-node1" "$log" || bad "the plan does not show 2 nodes" "$log"
grep -Eq "^  tp +2 x 2 +gloo-tcp over intra-node" "$log" || bad "tp groups should stay inside a node" "$log"
grep -Eq "^  pp +2 x 2 +gloo-tcp over ethernet.*\[[a-z0-9]+" "$log" || bad "pp groups should cross nodes over Ethernet" "$log"
/usr/bin/python3 - "$tmp/single/metrics.jsonl" "$tmp/nodes/metrics.jsonl" <<'PY' || fail=1
import json, sys
def losses(p):
    return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r}
ref, got = losses(sys.argv[1]), losses(sys.argv[2])
assert len(ref) == 20 and set(got) == set(ref), f"steps: single {len(ref)}, nodes {len(got)}"
worst = max(abs(got[s] - ref[s]) / abs(ref[s]) for s in ref)
print(f"2 nodes x 2: 20 steps, largest relative difference {worst:.2e}")
sys.exit(0 if worst <= 1e-4 else "FAIL: losses differ by more than 1e-4")
PY
no_leftovers "nodes"
finish
