#!/usr/bin/env bash
# --plan-only on the shipped example jobs (text and JSON) and on a generated topology: the JSON
# must parse and the plan invariants hold (checked with /usr/bin/python3); bad requests must
# exit with code 2 and say what was wrong.
set -u
bin=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
say_fail() { echo "FAIL $*"; fail=$((fail + 1)); }

# Invariants of one JSON plan: $1 file, $2 model layers.
check_json() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
layers = int(sys.argv[2])
errors = []
def need(cond, what):
    if not cond: errors.append(what)
world, tp, pp, dp = plan["world"], plan["tensor"], plan["pipeline"], plan["data"]
need(tp * pp * dp == world, f"tp*pp*dp = {tp*pp*dp} != world {world}")
ranks = plan["ranks"]
need([r["rank"] for r in ranks] == list(range(world)), "ranks not 0..world-1")
node_of = {r["rank"]: r["node"] for r in ranks}
island_of_node = {}
for isl in plan["islands"]:
    for n in isl["nodes"]:
        island_of_node[n] = isl["id"]
stages = plan["stages"]
need(sum(s["num_layers"] for s in stages) == layers, "stages do not sum to the layers")
need(all(s["num_layers"] >= 1 for s in stages), "empty stage")
kinds = {"tp", "pp", "dp", "embedding", "world"}
transports = {"nccl-ib", "nccl-roce", "intra-node", "nccl-socket", "gloo-tcp"}
count = {k: [0] * world for k in kinds}
for g in plan["groups"]:
    need(g["kind"] in kinds, f"bad group kind {g['kind']}")
    need(g["transport"] in transports, f"bad transport {g['transport']}")
    for r in g["ranks"]:
        count[g["kind"]][r] += 1
    islands = {island_of_node[node_of[r]] for r in g["ranks"]}
    need(g["crosses_islands"] == (len(islands) > 1), f"crosses_islands wrong for {g['kind']} {g['index']}")
    if g["kind"] == "tp":
        need(len({node_of[r] for r in g["ranks"]}) == 1, f"tp group {g['index']} crosses nodes")
    if g["transport"] in ("nccl-socket", "gloo-tcp") and g["crosses_nodes"]:
        need(g["interface"] != "", f"{g['kind']} group {g['index']} has no interface")
for k in ("tp", "pp", "dp", "world"):
    need(all(c == 1 for c in count[k]), f"a rank is not in exactly one {k} group")
# DP groups stay inside one island whenever every island holds whole stages.
devices = [isl["devices"] for isl in plan["islands"] if isl["nodes"]]
if all(d % (tp * dp) == 0 for d in devices):
    for g in plan["groups"]:
        need(not (g["kind"] in ("tp", "dp") and g["crosses_islands"]), f"{g['kind']} group {g['index']} crosses islands")
e = plan["estimate"]
parts = e["compute_s"] + e["tp_comm_s"] + e["pp_comm_s"] + e["bubble_s"] + e["dp_comm_s"] + e["update_s"] + e["log_s"] + e["sums_s"] + e["quota_s"]
need(abs(parts - e["step_time_s"]) <= 1e-6 * e["step_time_s"], f"estimate parts {parts} != step {e['step_time_s']}")
need(e["step_time_s"] > 0 and e["tokens_per_s"] > 0 and e["naive_step_time_s"] > 0, "non-positive estimate")
b = e["baselines"]
need(set(b) == {"megatron", "naive"}, f"baselines {sorted(b)}")
for name, base in b.items():
    need(base["step_time_s"] > 0 and abs(base["speedup"] - base["step_time_s"] / e["step_time_s"]) < 1e-6 * base["speedup"],
         f"baseline {name}: {base}")
# The NCCL environment: one entry per node; on CUDA plans every node binds bootstrap to an
# interface, and every node of an RDMA group gets its island's ports; nothing on CPU plans.
envs = plan["nccl_env"]
need([e["node"] for e in envs] == list(range(len(plan["nodes"]))), "nccl_env is not one entry per node")
for e in envs:
    v = e["vars"]
    need("NCCL_NET" not in v, f"node {e['node']}: NCCL_NET must never be set")
    if plan["device"] == "cuda":
        need(v.get("NCCL_SOCKET_IFNAME", "").startswith("="), f"node {e['node']}: no exact NCCL_SOCKET_IFNAME")
    else:
        need(v == {}, f"node {e['node']}: NCCL variables on a CPU plan")
for g in plan["groups"]:
    if g["transport"] in ("nccl-ib", "nccl-roce"):
        for r in g["ranks"]:
            v = envs[node_of[r]]["vars"]
            need(v.get("NCCL_IB_HCA", "").startswith("="), f"{g['kind']} {g['index']}: node {node_of[r]} lacks NCCL_IB_HCA")
            need("NCCL_IB_GID_INDEX" not in v or g["transport"] == "nccl-roce", f"{g['kind']} {g['index']}: GID index on IB")
need(len(plan["memory"]) == world and all(m["bytes"] > 0 for m in plan["memory"]), "memory per rank missing")
if errors:
    print("\n".join(errors[:20]))
    sys.exit(1)
PY
}

run_case() {  # name, layers, args...
  local name=$1 layers=$2
  shift 2
  if ! "$bin" "$@" --plan-only >"$tmp/$name.txt" 2>"$tmp/$name.err"; then
    say_fail "$name text: exit $?"; cat "$tmp/$name.err"; return
  fi
  for want in "Stages:" "Groups" "step time" "Memory per device"; do
    grep -qF "$want" "$tmp/$name.txt" || say_fail "$name text lacks '$want'"
  done
  if ! "$bin" "$@" --plan-only --format json >"$tmp/$name.json" 2>"$tmp/$name.err"; then
    say_fail "$name json: exit $?"; cat "$tmp/$name.err"; return
  fi
  check_json "$tmp/$name.json" "$layers" || say_fail "$name: JSON invariants"
}

run_case ib-roce-7b 36 --config "$src/configs/ib-roce-7b.yaml"
run_case ib-ethernet 24 --config "$src/configs/ib-ethernet.yaml"
grep -q "nccl-roce" "$tmp/ib-roce-7b.txt" || say_fail "ib-roce-7b: no nccl-roce group"
grep -q "nccl-ib" "$tmp/ib-roce-7b.txt" || say_fail "ib-roce-7b: no nccl-ib group"
grep -Eq "^  node 4 +roce-node0 .*NCCL_IB_GID_INDEX=3 NCCL_SOCKET_IFNAME==eth0" "$tmp/ib-roce-7b.txt" ||
  say_fail "ib-roce-7b: the text plan does not show roce-node0's NCCL environment"
# NCCL_NET overrides every communicator's netName: a CUDA job (and its preview) refuses it.
NCCL_NET=IB "$bin" --config "$src/configs/ib-roce-7b.yaml" --plan-only >/dev/null 2>"$tmp/net.err"
rc=$?
[ $rc -eq 2 ] || say_fail "NCCL_NET=IB --plan-only: exit $rc, expected 2"
grep -q "NCCL_NET='IB' is set" "$tmp/net.err" && grep -q "config.netName" "$tmp/net.err" ||
  { say_fail "NCCL_NET=IB: the message does not say why"; cat "$tmp/net.err"; }
NCCL_NET= "$bin" --config "$src/configs/ib-roce-7b.yaml" --plan-only >/dev/null 2>&1 ||
  say_fail "an empty NCCL_NET is refused"
# A variable the user set wins; the preview says so.
NCCL_SOCKET_IFNAME=bond0 "$bin" --config "$src/configs/ib-roce-7b.yaml" --plan-only >"$tmp/user.txt" 2>&1
grep -q "^note: NCCL_SOCKET_IFNAME=bond0 is set in this environment" "$tmp/user.txt" ||
  say_fail "a user's NCCL_SOCKET_IFNAME is not reported"
run_case default 4                                   # embedded default job, this node discovered
# A generated three-island topology given with --topology, degrees left to the search.
{
  echo "nodes:"
  echo "  - names: a[0-5]"
  echo "    devices: {kind: cuda, count: 8, memory_gb: 80, peak_tflops: 989}"
  echo "    nics: [{kind: ib, name: 'mlx5_[0-3]', rate_gbps: 400, fabric: fa}, {kind: ethernet, name: eth0, rate_gbps: 25}]"
  echo "  - names: b[0-3]"
  echo "    devices: {kind: cuda, count: 8, memory_gb: 80, peak_tflops: 989}"
  echo "    nics: [{kind: roce, name: 'mlx5_[0-1]', rate_gbps: 100, fabric: fb}, {kind: ethernet, name: eth0, rate_gbps: 25}]"
  echo "  - names: c[0-1]"
  echo "    devices: {kind: cuda, count: 8, memory_gb: 80, peak_tflops: 989}"
  echo "    nics: [{kind: ethernet, name: eth0, rate_gbps: 10}]"
} >"$tmp/three.yaml"
run_case three-islands 36 --config "$src/configs/ib-roce-7b.yaml" --topology "$tmp/three.yaml" \
  --set parallel.tensor=auto --set parallel.pipeline=auto --set parallel.data=auto
run_case megatron 36 --config "$src/configs/ib-roce-7b.yaml" --set parallel.placement=megatron
grep -Eq "^  dp .*nccl-socket over ethernet" "$tmp/megatron.txt" || say_fail "megatron: dp groups not on Ethernet"
# --nodes: the launch order the run will number nodes by (interleaved here), also a subset.
"$bin" --config "$src/configs/ib-roce-7b.yaml" --topology "$tmp/three.yaml" --plan-only --format json \
  --nodes "a0,b0,a1,b1,a2,b2,a3,b3" --set parallel.placement=naive --set parallel.tensor=8 --set parallel.pipeline=2 \
  --set parallel.data=4 >"$tmp/order.json" 2>"$tmp/order.err" || { say_fail "--nodes: exit $?"; cat "$tmp/order.err"; }
/usr/bin/python3 -c 'import json,sys; n=json.load(open(sys.argv[1]))["nodes"]; sys.exit(0 if n==sys.argv[2].split(",") else f"nodes {n}")' \
  "$tmp/order.json" "a0,b0,a1,b1,a2,b2,a3,b3" || say_fail "--nodes: the plan does not list the nodes in launch order"
# A calibration file (docs/cost-model.md) changes the estimate and is shown.
cat >"$tmp/cal.yaml" <<'CAL'
format: holmes-calibration/2
source: "plan_only.sh"
device: {kind: cuda, name: H100-SXM, driver: "550.54.15", date: "2026-12-01T00:00:00Z"}
compute: {device_tflops: 100, update_ns_per_param: 2}
links:
  ethernet: {efficiency: 0.5, latency_us: 80}
CAL
"$bin" --config "$src/configs/ib-roce-7b.yaml" --plan-only --format json --set cluster.calibration="$tmp/cal.yaml" \
  >"$tmp/cal.json" 2>"$tmp/cal.err" || { say_fail "calibration: exit $?"; cat "$tmp/cal.err"; }
/usr/bin/python3 - "$tmp/cal.json" "$tmp/ib-roce-7b.json" <<'PY' || say_fail "calibration: not applied"
import json, sys
cal, nominal = (json.load(open(p)) for p in sys.argv[1:3])
assert cal["calibration"]["links"]["ethernet"]["efficiency"] == 0.5, cal["calibration"]
assert nominal["calibration"] is None
assert all(s["tflops"] == 100 for s in cal["stages"]), cal["stages"]
assert cal["estimate"]["update_s"] > 0 and nominal["estimate"]["update_s"] == 0
pp = [g for g in cal["groups"] if g["kind"] == "pp" and g["link"] == "ethernet"]
pn = [g for g in nominal["groups"] if g["kind"] == "pp" and g["link"] == "ethernet"]
assert pp and abs(pp[0]["gbps_per_rank"] - pn[0]["gbps_per_rank"] / 2) < 1e-9 and pp[0]["latency_us"] == 80, (pp[0], pn[0])
PY

# The device-kind rule: a file measured on CPU devices (every format-1 file is) never prices a
# GPU plan: exit 2 naming both kinds.
printf 'format: holmes-calibration/1\ncompute: {device_tflops: 0.05, cpu_tflops: 0.06}\nlinks:\n  intra-node: {efficiency: 0.02, latency_us: 300}\n' \
  >"$tmp/cpu-cal.yaml"
"$bin" --config "$src/configs/ib-roce-7b.yaml" --plan-only --set cluster.calibration="$tmp/cpu-cal.yaml" \
  >/dev/null 2>"$tmp/cpu-cal.err"
code=$?
[ "$code" -eq 2 ] || { say_fail "cpu calibration on a cuda plan: exit $code, expected 2"; cat "$tmp/cpu-cal.err"; }
grep -q "measured on cpu devices and this plan runs on cuda devices" "$tmp/cpu-cal.err" \
  || { say_fail "cpu calibration on a cuda plan: message"; cat "$tmp/cpu-cal.err"; }

# Bad requests: exit 2 with the numbers.
expect_2() {  # name, fragment, args...
  local name=$1 frag=$2
  shift 2
  "$bin" "$@" --plan-only >/dev/null 2>"$tmp/$name.err"
  local code=$?
  [ "$code" -eq 2 ] || { say_fail "$name: exit $code, expected 2"; cat "$tmp/$name.err"; }
  grep -qF -- "$frag" "$tmp/$name.err" || { say_fail "$name: message lacks '$frag'"; cat "$tmp/$name.err"; }
}
expect_2 product "but the cluster has 64 devices" --config "$src/configs/ib-roce-7b.yaml" --set parallel.data=3 \
  --set train.global_batch=258 --set train.micro_batch=2
sed 's/partition: auto/partition: [20, 20]/' "$src/configs/ib-roce-7b.yaml" >"$tmp/bad-partition.yaml"
sed -i "s#topology: topologies/#topology: $src/configs/topologies/#" "$tmp/bad-partition.yaml"
expect_2 partition "sums to 40" --config "$tmp/bad-partition.yaml"
expect_2 format "json" --config "$src/configs/ib-roce-7b.yaml" --format yaml
expect_2 nodes "which the topology does not describe" --config "$src/configs/ib-roce-7b.yaml" --topology "$tmp/three.yaml" \
  --nodes "a[0-3],zz9" --set parallel.tensor=8 --set parallel.pipeline=2 --set parallel.data=2
expect_2 calibration "no-such-calibration.yaml" --config "$src/configs/ib-roce-7b.yaml" \
  --set cluster.calibration="$tmp/no-such-calibration.yaml"
expect_2 topology "no-such-topology.yaml" --config "$src/configs/ib-roce-7b.yaml" --topology "$tmp/no-such-topology.yaml"

[ "$fail" -eq 0 ] && echo "plan_only: all cases passed"
exit $((fail > 0))
