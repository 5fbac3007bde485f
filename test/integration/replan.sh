#!/usr/bin/env bash
# parallel.elastic without replicas (docs/elastic.md "A single pipeline that loses a node"):
# one pipeline of 3 stages across 3 nodes played by one machine (torchrun-style ranks named
# fake-node0..2 by HOLMES_NODE_NAME, so the pipeline groups cross "nodes" over Ethernet),
# checkpoints every 5 steps.
# (1) --plan-only accepts elastic with one replica; a job on one node is refused (exit 2).
# (2) Rank 2 (node 2) killed after step 7: ranks 0 and 1 go on in the same processes, re-plan
#     on nodes 0 and 1 and finish (exit 0); the log names the lost node and says 2 steps (1024
#     tokens) are redone from the peer copies of step 5 (each rank's shard kept on the next
#     node at checkpoint 5), resharded without reading the folder; metrics.jsonl logs steps 1..20 once each (one
#     curve), the rows of the discarded steps 6 and 7 in metrics-discarded.jsonl, marked; the
#     redone step 6 continues the curve: its loss within 1e-4 (relative) of the discarded one's
#     (another partition sums in another order); steps 1..7 equal the uninterrupted 3-node run
#     bit for bit and steps 8..20 within 1e-4.
# (3) A fresh job on the survivors (2 nodes, the degrees left to the planner as the re-plan
#     does) resumed from the same checkpoint 5 runs the same plan (same plan hash) and trains
#     the same: losses of steps 6..20 and every rank's shard of the final checkpoint equal the
#     re-planned job's bit for bit (the copies restore what the folder holds).
# (4) Nodes of 0.003 GB (the topology file): three stages fit, two cannot hold the model.
#     Rank 2 killed after step 7: ranks 0 and 1 stop (exit 1) saying the survivors cannot hold
#     the model; checkpoint 5 stays complete, and the job resumed on three nodes finishes.
# (5) Two ranks per node (6 ranks, tp 2 x pp 3): rank 5 killed; rank 4 (same node) stops
#     naming its node; ranks 0..3 re-plan on nodes 0 and 1 and finish.
# (6) Rank 2 frozen (SIGSTOP) after step 7: found after cluster.timeout_s, the same re-plan and
#     the same losses as (2).
# (7) Two losses (rank 2 after step 7, rank 1 after step 13): a second re-plan (generation 2)
#     onto node 0 alone, from the peer copies of step 10 made by generation 1; the uninterrupted
#     run's losses within 1e-6 (one rank holding every layer reduces a step's logged loss in
#     another order: it differs in the 8th digit at one step here).
# (8) Ranks 1 and 2 killed together after step 7: rank 1's copy died with node 2, so node 0
#     trains from checkpoint 5 in the folder; the uninterrupted run's losses within 1e-6.
# (9) Rank 0 killed after step 7: the store, served by the process rank 0 started, outlives it;
#     ranks 1 and 2 re-plan on nodes 1 and 2 and train as in (2), the same losses.
# Usage: replan.sh <holmes-train> <source dir>
set -u
bin=$1
tmp=$(mktemp -d)
source "$(dirname "$0")/dist_common.bash"
skip_without_ethernet
job=("${tiny_job[@]}" --set checkpoint.interval=5 --set checkpoint.keep=10 --set cluster.timeout_s=10
  --set parallel.elastic=true)
pp3=(--set parallel.tensor=1 --set parallel.pipeline=3 --set parallel.data=1)

# launch NAME NODES PER_NODE ARGS...: NODES x PER_NODE ranks, PER_NODE on each fake node,
# into $tmp/NAME; each rank's exit code in codes[rank], its log $tmp/NAME.<rank>.log. A rank's
# HOLMES_TEST_SIGNAL_AFTER_STEP is hooks[rank] when set, else the caller's.
hooks=()
launch() {
  local name=$1 nodes=$2 per=$3
  shift 3
  local world=$((nodes * per)) port
  port=$(free_port)
  local pids=()
  for ((r = 0; r < world; r++)); do
    RANK=$r WORLD_SIZE=$world LOCAL_RANK=$((r % per)) LOCAL_WORLD_SIZE=$per GROUP_RANK=$((r / per)) \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port HOLMES_NODE_NAME=fake-node$((r / per)) HOLMES_JOB_TOKEN=replan-$name \
      env ${hooks[$r]:+HOLMES_TEST_SIGNAL_AFTER_STEP=${hooks[$r]}} timeout 180 "$exe" "${job[@]}" --set job.output_dir="$tmp/$name" "$@" >"$tmp/$name.$r.log" 2>&1 &
    pids+=($!)
    echo $! >"$tmp/$name.$r.pid"
  done
  codes=()
  for ((r = 0; r < world; r++)); do
    wait "${pids[$r]}" 2>/dev/null
    codes+=($?)
  done
}
# losses NAME: "step loss" per metrics row of NAME (file $tmp/NAME/metrics.jsonl unless a path)
rows_of() { python3 -c 'import json, sys
for r in map(json.loads, open(sys.argv[1])):
    if "loss" in r and "step_ms" in r: print(r["step"], repr(r["loss"]))' "$1"; }

# near_reference NAME LABEL: NAME's metrics log steps 1..20 once each, every loss within 1e-6
# (relative) of the uninterrupted run's.
near_reference() {
  python3 - "$tmp/ref/metrics.jsonl" "$tmp/$1/metrics.jsonl" "$2" <<'PY' || fail=1
import json, sys
ref, got = ([(r["step"], r["loss"]) for r in map(json.loads, open(p)) if "step_ms" in r] for p in sys.argv[1:3])
label = sys.argv[3]
assert [s for s, _ in got] == list(range(1, 21)), f"FAIL {label}: metrics steps {[s for s, _ in got]}"
worst = max(abs(a[1] - b[1]) / a[1] for a, b in zip(ref, got))
assert worst <= 1e-6, f"FAIL {label}: losses differ from the uninterrupted run's by {worst:.1e} relative"
print(f"{label}: steps 1..20 once, within {worst:.1e} of the uninterrupted run")
PY
}

# 1. Accepted with one replica; refused (exit 2, naming the key) on one node, where a lost rank
#    leaves nothing.
"$exe" "${job[@]}" "${pp3[@]}" --nproc-per-node 3 --plan-only >"$tmp/plan.log" 2>&1 ||
  bad "elastic with one replica: --plan-only exit $?" "$tmp/plan.log"
timeout 120 "$exe" "${job[@]}" "${pp3[@]}" --nproc-per-node 3 --set job.output_dir="$tmp/one" >"$tmp/one.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || bad "elastic with one replica on one node: exit $rc, expected 2" "$tmp/one.log"
grep -q "parallel.elastic = true with parallel.replicas = 1 .* runs on one node .*accepted: " "$tmp/one.log" ||
  bad "elastic on one node: the key and what is accepted are not named" "$tmp/one.log"

# 2. The uninterrupted run, then rank 2 killed after step 7.
launch ref 3 1 "${pp3[@]}"
[ "${codes[*]}" = "0 0 0" ] || bad "uninterrupted: exit codes ${codes[*]}" "$tmp/ref.0.log"
HOLMES_TEST_SIGNAL_AFTER_STEP=7:KILL:2 launch kill 3 1 "${pp3[@]}"
[ "${codes[*]}" = "0 0 137" ] || bad "kill: exit codes ${codes[*]}, expected 0 0 137" "$tmp/kill.0.log"
log=$tmp/kill.0.log
grep -q "re-plan: lost node(s) \[2\] (fake-node2; missing rank(s) \[2\]); generation 1: 2 rank(s) on 2 node(s)" "$log" ||
  bad "kill: the lost node is not named" "$log"
grep -q "re-plan: generation 1 trains from the peer copies of step 5, held in the survivors' memory (the checkpoint folder is not read): 2 step(s) redone (1024 tokens)" "$log" ||
  bad "kill: the redone steps are not told, or not from the peer copies" "$log"
grep -q "^peer copies of step 5: each rank's shard kept and sent to its buddy on another node" "$log" ||
  bad "kill: no peer copies at checkpoint 5" "$log"
grep -q "^resume: continuing from the peer copies of step 5 at step 5 .*saved by 3 ranks, another plan: resharded" "$log" ||
  bad "kill: the survivors did not reshard the peer copies" "$log"
[ "$(grep -c '^plan hash' "$log")" -eq 2 ] || bad "kill: expected two plans in rank 0's log" "$log"
python3 - "$tmp/ref/metrics.jsonl" "$tmp/kill/metrics.jsonl" "$tmp/kill/metrics-discarded.jsonl" <<'PY' || fail=1
import json, sys
def rows(p):
    return [r for r in map(json.loads, open(p)) if "loss" in r and "step_ms" in r]
ref = {r["step"]: r["loss"] for r in rows(sys.argv[1])}
got = rows(sys.argv[2])
steps = [r["step"] for r in got]
assert steps == list(range(1, 21)), f"FAIL metrics.jsonl steps {steps}"
gone = rows(sys.argv[3])
assert [(r["step"], r["discarded_by_generation"]) for r in gone] == [(6, 1), (7, 1)], f"FAIL discarded rows {gone}"
loss = {r["step"]: r["loss"] for r in got}
jump = abs(loss[6] - gone[0]["loss"]) / gone[0]["loss"]
assert jump <= 1e-4, f"FAIL the redone step 6 loss {loss[6]} vs {gone[0]['loss']} before the loss of the node"
assert all(loss[s] == ref[s] for s in range(1, 6)) and gone[0]["loss"] == ref[6] and gone[1]["loss"] == ref[7], \
    "FAIL steps 1..7 before the re-plan differ from the uninterrupted run"
worst = max(abs(loss[s] - ref[s]) / ref[s] for s in range(6, 21))
assert worst <= 1e-4, f"FAIL steps 6..20 differ from the uninterrupted run by {worst:.2e} relative"
print(f"re-plan: step 6 redone within {jump:.1e} of its first loss; steps 6..20 within {worst:.1e} of the uninterrupted run")
PY

# 3. A fresh job on the survivors' nodes from the same checkpoint.
launch fresh 2 1 --set parallel.pipeline=auto --set parallel.data=auto --resume "$tmp/kill/checkpoints/step-00000005"
[ "${codes[*]}" = "0 0" ] || bad "fresh on the survivors: exit codes ${codes[*]}" "$tmp/fresh.0.log"
[ "$(grep '^plan hash' "$tmp/kill.0.log" | tail -1)" = "$(grep '^plan hash' "$tmp/fresh.0.log")" ] ||
  bad "the re-plan's plan differs from a fresh job's on the survivors" "$tmp/fresh.0.log"
[ "$(rows_of "$tmp/fresh/metrics.jsonl")" = "$(rows_of "$tmp/kill/metrics.jsonl" | sed -n '6,$p')" ] ||
  bad "steps 6..20 differ from a fresh job on the survivors resumed from checkpoint 5"
for shard in "$tmp"/fresh/checkpoints/step-00000020/rank-*.bin; do
  cmp -s "$shard" "$tmp/kill/checkpoints/step-00000020/$(basename "$shard")" ||
    bad "final checkpoint: $(basename "$shard") differs from the fresh job's on the survivors"
done
[ -n "$(ls "$tmp"/fresh/checkpoints/step-00000020/rank-*.bin 2>/dev/null)" ] || bad "fresh: no final checkpoint shards"

# 4. Survivors that cannot hold the model.
disc=$("$exe" discover --format yaml | sed -n '/^  - names:/,$p')
{
  echo "nodes:"
  for n in 0 1 2; do echo "$disc" | sed -E "s/^  - names: .*/  - names: fake-node$n/; s/memory_gb: [0-9.e+-]+/memory_gb: 0.003/"; done
} >"$tmp/small.yaml"
HOLMES_TEST_SIGNAL_AFTER_STEP=7:KILL:2 launch small 3 1 "${pp3[@]}" --topology "$tmp/small.yaml"
[ "${codes[*]}" = "1 1 137" ] || bad "cannot hold: exit codes ${codes[*]}, expected 1 1 137" "$tmp/small.0.log"
for r in 0 1; do
  grep -q "rank $r: re-plan: lost node(s) \[2\] .*; the survivors cannot hold the model: 2 device(s) on 2 node(s) left: .*checkpoints are untouched" \
    "$tmp/small.$r.log" || bad "cannot hold: rank $r does not say why it stops" "$tmp/small.$r.log"
done
[ -f "$tmp/small/checkpoints/step-00000005/COMMITTED" ] || bad "cannot hold: checkpoint 5 is not complete"
launch small 3 1 "${pp3[@]}" --topology "$tmp/small.yaml" --resume auto
[ "${codes[*]}" = "0 0 0" ] || bad "cannot hold: resumed on 3 nodes: exit codes ${codes[*]}" "$tmp/small.0.log"
[ "$(rows_of "$tmp/small/metrics.jsonl" | cut -d' ' -f1 | tr '\n' ' ')" = "$(seq -s ' ' 1 20) " ] ||
  bad "cannot hold, resumed: metrics steps $(rows_of "$tmp/small/metrics.jsonl" | cut -d' ' -f1 | tr '\n' ' ')"

# 5. Two ranks per node: the other rank of the lost node stops, naming it.
HOLMES_TEST_SIGNAL_AFTER_STEP=7:KILL:5 launch two 3 2 --set parallel.tensor=2 --set parallel.pipeline=3 --set parallel.data=1
[ "${codes[*]}" = "0 0 0 0 1 137" ] || bad "two per node: exit codes ${codes[*]}, expected 0 0 0 0 1 137" "$tmp/two.0.log"
grep -q "rank 4: re-plan: node 2 (fake-node2) lost rank(s) \[5\] of generation 0; the other nodes go on" "$tmp/two.4.log" ||
  bad "two per node: rank 4 does not name its node's loss" "$tmp/two.4.log"
grep -q "generation 1: 4 rank(s) on 2 node(s)" "$tmp/two.0.log" || bad "two per node: no re-plan on 4 ranks" "$tmp/two.0.log"
[ "$(rows_of "$tmp/two/metrics.jsonl" | cut -d' ' -f1 | tr '\n' ' ')" = "$(seq -s ' ' 1 20) " ] ||
  bad "two per node: metrics steps $(rows_of "$tmp/two/metrics.jsonl" | cut -d' ' -f1 | tr '\n' ' ')"
# 6. Rank 2 frozen (SIGSTOP) after step 7, cluster.timeout_s 5: its peers find it after the
#    time-out and the survivors finish as in (2); the frozen worker is ended by the test.
HOLMES_TEST_SIGNAL_AFTER_STEP=7:STOP:2 launch frozen 3 1 "${pp3[@]}" --set cluster.timeout_s=5 &
launcher=$!
gone() { [ -f "$tmp/frozen.$1.pid" ] && ! kill -0 "$(cat "$tmp/frozen.$1.pid")" 2>/dev/null; }
wait_for 'gone 0 && gone 1' 150 || bad "frozen: the survivors did not finish" "$tmp/frozen.0.log"
pkill -KILL -P "$(cat "$tmp/frozen.2.pid")" 2>/dev/null
wait "$launcher"
grep -q "^done: 20 steps" "$tmp/frozen.0.log" || bad "frozen: rank 0 did not finish the job" "$tmp/frozen.0.log"
grep -q "re-plan: lost node(s) \[2\] (fake-node2; missing rank(s) \[2\])" "$tmp/frozen.0.log" ||
  bad "frozen: the frozen node is not named" "$tmp/frozen.0.log"
[ "$(rows_of "$tmp/frozen/metrics.jsonl")" = "$(rows_of "$tmp/kill/metrics.jsonl")" ] ||
  bad "frozen: the losses differ from the killed case's"
# killed_twice NAME LABEL HOOK1 PATTERN WHAT: ranks 1 (its hook HOOK1) and 2 (after step 7)
# killed; ranks 1 and 2 exit 137, rank 0 finishes, its log matches PATTERN (else "WHAT"), and
# the losses are the uninterrupted run's (near_reference).
killed_twice() {
  hooks=("" "$3" "7:KILL:2")
  launch "$1" 3 1 "${pp3[@]}"
  hooks=()
  [ "${codes[*]}" = "0 137 137" ] || bad "$2: exit codes ${codes[*]}, expected 0 137 137" "$tmp/$1.0.log"
  grep -q "$4" "$tmp/$1.0.log" || bad "$2: $5" "$tmp/$1.0.log"
  near_reference "$1" "$2"
}
# 7. Two losses: rank 2 killed after step 7, then rank 1 (rank 1 of generation 1 too) after step
#    13, once generation 1 made its peer copies of step 10: generation 2 trains on node 0 alone
#    from those copies, and the job finishes with steps 1..20 once each and the uninterrupted
#    run's losses.
killed_twice twice "two losses" "13:KILL:1" \
  "generation 2 trains from the peer copies of step 10, held in the survivors' memory .*: 3 step(s) redone" \
  "no second re-plan from the peer copies of step 10"
# 8. Two neighbouring nodes lost at once (ranks 1 and 2 killed after step 7): rank 1's only copy
#    was on node 2, so the peer copies are incomplete and node 0 trains from checkpoint 5 in the
#    folder, with the uninterrupted run's losses.
killed_twice pair "two nodes at once" "7:KILL:1" \
  "re-plan: generation 1 trains from checkpoint .*step-00000005 (step 5): 2 step(s) redone (1024 tokens)" \
  "not from checkpoint 5 in the folder"
# 9. Rank 0 (node 0) killed after step 7. Its process started the store's keeper, which serves
#    on: ranks 1 and 2 re-plan on nodes 1 and 2 (the same plan as in (2)), rank 1 becomes rank 0
#    and trains from the peer copies of step 5 (node 0's shard was kept on node 1): the losses of
#    (2), steps 1..20 once each; the keeper ends with the job (no_leftovers).
HOLMES_TEST_SIGNAL_AFTER_STEP=7:KILL:0 launch first 3 1 "${pp3[@]}"
[ "${codes[*]}" = "137 0 0" ] || bad "rank 0 killed: exit codes ${codes[*]}, expected 137 0 0" "$tmp/first.1.log"
grep -q "rank 1: re-plan: lost node(s) \[0\] (fake-node0; missing rank(s) \[0\]); generation 1: 2 rank(s) on 2 node(s), .*this rank becomes rank 0" \
  "$tmp/first.1.log" || bad "rank 0 killed: the survivors do not name node 0 or renumber" "$tmp/first.1.log"
[ "$(rows_of "$tmp/first/metrics.jsonl")" = "$(rows_of "$tmp/kill/metrics.jsonl")" ] ||
  bad "rank 0 killed: the losses differ from those of node 2's loss" "$tmp/first.1.log"
no_leftovers "replan"
finish
