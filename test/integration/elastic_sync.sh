#!/usr/bin/env bash
# parallel.elastic with parallel.outer: sync (docs/elastic.md, "Elastic sync replicas") through
# the local launcher: 3 replicas of one rank (and of two, data 2 inside), 12 steps. Each replica
# shards its optimizer inside itself (HSDP) and every step all-reduces its owned gradients over
# the outer group, so every replica holds the whole state.
# (1) Bad input exits 2 naming the key: elastic with outer_overlap, with the interleaved
#     schedule, min_replicas above replicas.
# (2) Without a failure an elastic sync job trains as the same job without elastic: losses
#     within 1e-6 relative (the loss is summed inside each replica, then across, in another
#     order than one sum over the whole data-parallel group; see docs/elastic.md), every row
#     naming replicas [0, 1, 2].
# (3) Replica 1 killed after step 6, right after the checkpoint of step 6 was committed (log
#     every step: the survivors meet the loss in the log line's sum after step 6). The job
#     finishes with replicas [0, 2] from step 7; the survivors' weights AND AdamW moments equal
#     each other and, bit for bit, those of a 2-replica elastic sync job resumed from that
#     checkpoint (global batch 4 instead of 6, the data stream continued at sequence 36), whose
#     losses of steps 7-12 are the survivors' too; the survivors' own checkpoint 12 has that
#     job's shard files byte for byte.
# (4) The same kill with one log line at the end: the survivors meet the loss inside step 7's
#     gradient all-reduce across the replicas, regroup and redo step 7 over replicas 0 and 2:
#     the same final state as (3), bit for bit.
# (5) Two ranks per replica (data 2, ZeRO-1 inside a replica): rank 2 of replica 1 killed after
#     step 6; its peer rank 3 stops naming it; ranks 0, 1, 4, 5 finish, each equal to the rank
#     at its coordinate of a 2-replica job resumed from the step-6 checkpoint.
# (5b) The same replica lost by rank 2 alone dying as step 7's all-reduce across replicas begins:
#     the other coordinate's outer group completes, so the failure must wait for the step's
#     verdict (after the sums inside each replica); the survivors end as in (5).
# (6) Replica 1 frozen (SIGSTOP) after step 6, cluster.timeout_s 5: named after the time-out,
#     the job goes on and ends with the state of (4); the launcher ends the frozen worker.
# (6b) Replica 1 frozen inside the commit of the checkpoint of step 6: found by its heartbeat
#     within cluster.timeout_s, the survivors save checkpoint 6 again by themselves and end
#     with the state of (3).
# (7) Replica 0 (rank 0, the leader) killed after step 6: replicas 1 and 2 go on, rank 1 leads the
#     log and metrics (every step one row), the final weights and checkpoints; the state and the
#     survivors' checkpoint 12 equal those of (3).
# (8) Rejoin: replica 1 killed after step 6, its rank started again by hand; admitted at the
#     update of step 9, it takes replica 0's weights and AdamW moments over the network: at the
#     join they equal its peer's bit for bit; rows 10-12 name [0, 1, 2]; all three end equal.
# (8b) Replica 0, the leader, killed and started again by hand: rank 1 leads meanwhile; at the
#     join rank 0 takes rank 1's state bit for bit and leads again; every step one row.
# Usage: elastic_sync.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
. "$(dirname "$0")/elastic_common.bash"
export HOLMES_LAUNCH_GRACE_S=2
steps=12
# The learning-rate schedule in tokens (3 steps' warm-up and 12 steps' decay of the 3-replica
# job), so that the jobs of 2 replicas resumed below follow the same schedule.
base=(--set parallel.replicas=3 --set parallel.outer=sync --set train.global_batch=6 --set checkpoint.interval=0
  --set cluster.timeout_s=10 --set log.interval=1 --set train.warmup_steps=0 --set train.warmup_tokens=576
  --set train.decay_tokens=2304)
job=(--nproc-per-node 3 "${base[@]}")
el=("${job[@]}" --set parallel.elastic=true)
quiet=(--set log.interval=1000)  # no log line between the first and the last: no sum after step 6

# same_state DUMP_A DUMP_B: two dumps (HOLMES_TEST_DUMP_WEIGHTS: a header of five uint64, then
# weights, AdamW m and v, no outer floats) hold finite weights and the same weights and
# moments bit for bit.
same_state() {
  python3 - "$1" "$2" <<'PY'
import math, struct, sys
def state(path):
    data = open(path, "rb").read()
    magic, replica, n, m, k = struct.unpack("<5Q", data[:40])
    assert k == 0 and len(data) == 40 + 4 * (n + 2 * m), (path, n, m, k, len(data))
    return n, m, data[40:]
(na, ma, a), (nb, mb, b) = state(sys.argv[1]), state(sys.argv[2])
assert (na, ma) == (nb, mb), ((na, ma), (nb, mb))
assert all(math.isfinite(x) for x in struct.unpack(f"<{na}f", a[:4 * na])), "weights not finite"
diff = sum(1 for i in range(0, len(a), 4) if a[i:i + 4] != b[i:i + 4])
assert diff == 0, f"{diff} of {na + 2 * ma} floats differ"
print(f"{na} weights and 2 x {ma} moments equal bit for bit")
PY
}
lost_after_6="1:0,1,2 2:0,1,2 3:0,1,2 4:0,1,2 5:0,1,2 6:0,1,2 7:0,2 8:0,2 9:0,2 10:0,2 11:0,2 12:0,2"
expect_loss_of_1() {  # NAME: exit 0, replicas [0, 2] from row 7 on, replica 1 named, survivors equal
  local name=$1
  [ "$rc" -eq 0 ] || { bad "$name: exit $rc, expected 0" "$tmp/$name.log"; return; }
  [ "$(rows "$name")" = "$lost_after_6" ] || bad "$name: rows name replicas '$(rows "$name")'" "$tmp/$name.log"
  grep -q "rank 0: elastic: lost replica 1 (rank 1) (missing rank(s) \[1\]); generation 1: replicas \[0, 2\] go on from step 7" \
    "$tmp/$name.log" || bad "$name: the loss of replica 1 is not named" "$tmp/$name.log"
  same_state "$tmp/$name-dump/rank-0.bin" "$tmp/$name-dump/rank-2.bin" || bad "$name: survivors' states differ"
}

# 1. Bad input.
for bad_set in "parallel.outer_overlap=1" "parallel.schedule=interleaved" "parallel.min_replicas=4"; do
  extra=()
  [ "$bad_set" = "parallel.schedule=interleaved" ] && extra=(--set model.layers=4 --set parallel.pipeline=2 --set parallel.virtual_stages=2)
  run "$tmp/bad" 4 "${el[@]}" --set "$bad_set" "${extra[@]}" --plan-only
  [ "$rc" -eq 2 ] || bad "$bad_set: exit $rc, expected 2" "$tmp/bad.log"
  key=parallel.elastic
  [ "$bad_set" = "parallel.min_replicas=4" ] && key=parallel.min_replicas
  grep -q "$key.*accepted" "$tmp/bad.log" || bad "$bad_set: $key and what is accepted not named" "$tmp/bad.log"
  rm -f "$tmp/bad.log"
done
# --plan-only shows the layout: a data-parallel group per replica, the outer groups across.
run "$tmp/plan" 4 "${el[@]}" --plan-only
[ "$rc" -eq 0 ] || bad "plan-only: exit $rc" "$tmp/plan.log"
grep -q "outer sync, elastic (HSDP" "$tmp/plan.log" || bad "plan-only: no elastic sync replicas" "$tmp/plan.log"
grep -Eq "^ *outer +1 x 3 " "$tmp/plan.log" || bad "plan-only: no outer group of 3" "$tmp/plan.log"

# 2. No failure: the training of the same job without elastic.
run "$tmp/plain" "$steps" "${job[@]}"
[ "$rc" -eq 0 ] || { bad "non-elastic reference: exit $rc" "$tmp/plain.log"; exit 1; }
run "$tmp/ref" "$steps" "${el[@]}"
[ "$rc" -eq 0 ] || { bad "elastic, no failure: exit $rc" "$tmp/ref.log"; exit 1; }
LOSS_TOL=1e-6 same_losses "$tmp/plain/metrics.jsonl" 1 "$steps" "$tmp/ref/metrics.jsonl" || fail=1
[ "$(rows ref)" = "$(seq -s ' ' -f '%g:0,1,2' 1 "$steps")" ] || bad "ref: rows name replicas '$(rows ref)'" "$tmp/ref.log"

# 3. Replica 1 killed after the checkpoint of step 6; a 2-replica job resumed from it.
HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:1 HOLMES_TEST_DUMP_WEIGHTS=$(dumped ck) run "$tmp/ck" "$steps" "${el[@]}" \
  --set checkpoint.interval=6 --set checkpoint.background_write=false
expect_loss_of_1 ck
[ -f "$tmp/ck/checkpoints/step-00000006/COMMITTED" ] || bad "ck: checkpoint 6 not committed" "$tmp/ck.log"
HOLMES_TEST_DUMP_WEIGHTS=$(dumped two) run "$tmp/two" "$steps" --nproc-per-node 2 "${base[@]}" \
  --set parallel.elastic=true --set parallel.replicas=2 --set train.global_batch=4 \
  --set checkpoint.resume="$tmp/ck/checkpoints/step-00000006" --set checkpoint.interval=6 \
  --set checkpoint.background_write=false
[ "$rc" -eq 0 ] || bad "two: exit $rc" "$tmp/two.log"
grep -q "resume: continuing from .*step-00000006 at step 6 (1152 tokens seen; saved by 3 ranks, another plan" \
  "$tmp/two.log" || bad "two: not resumed at sequence 36 of the stream" "$tmp/two.log"
same_state "$tmp/ck-dump/rank-0.bin" "$tmp/two-dump/rank-0.bin" || bad "two: rank 0 differs from the survivors'"
same_state "$tmp/ck-dump/rank-2.bin" "$tmp/two-dump/rank-1.bin" || bad "two: rank 1 differs from survivor rank 2"
same_losses "$tmp/ck/metrics.jsonl" 7 "$steps" "$tmp/two/metrics.jsonl" || fail=1
# The survivors' own final checkpoint (2 ranks, written by replica 0) holds the shard files of
# the 2-replica job's, byte for byte.
[ -f "$tmp/ck/checkpoints/step-00000012/COMMITTED" ] || bad "ck: the survivors' checkpoint 12 not committed" "$tmp/ck.log"
for f in rank-00000.bin rank-00001.bin; do
  cmp -s "$tmp/ck/checkpoints/step-00000012/$f" "$tmp/two/checkpoints/step-00000012/$f" ||
    bad "ck: the survivors' checkpoint 12 $f differs from the 2-replica job's"
done

# 4. The loss met inside step 7's all-reduce across the replicas: step 7 redone over [0, 2].
HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:1 HOLMES_TEST_DUMP_WEIGHTS=$(dumped redo) run "$tmp/redo" "$steps" "${el[@]}" "${quiet[@]}"
expect_loss_of_1 redo
grep -q "rank [02]: elastic: comm: all_reduce on group 'outer0'" "$tmp/redo.log" \
  || bad "redo: the survivors did not fail in the gradient all-reduce" "$tmp/redo.log"
same_state "$tmp/ck-dump/rank-0.bin" "$tmp/redo-dump/rank-0.bin" || bad "redo: state differs from ck's"

# 5. Two ranks per replica.
dp=(--set parallel.data=2 --set train.global_batch=12)
HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:2 HOLMES_TEST_DUMP_WEIGHTS=$(dumped dp) run "$tmp/dp" "$steps" --nproc-per-node 6 \
  "${base[@]}" --set parallel.elastic=true "${dp[@]}" "${quiet[@]}" --set checkpoint.interval=6 \
  --set checkpoint.background_write=false
grep -q "rank 3: comm: .* on group 'dp1' .*, peer rank 2" "$tmp/dp.log" || bad "dp: rank 3 does not name rank 2" "$tmp/dp.log"
replica_1_pair_lost dp
HOLMES_TEST_DUMP_WEIGHTS=$(dumped dp2) run "$tmp/dp2" "$steps" --nproc-per-node 4 "${base[@]}" \
  --set parallel.elastic=true --set parallel.replicas=2 --set parallel.data=2 --set train.global_batch=8 \
  --set checkpoint.resume="$tmp/dp/checkpoints/step-00000006"
[ "$rc" -eq 0 ] || bad "dp2: exit $rc" "$tmp/dp2.log"
for pair in 0:0 1:1 4:2 5:3; do
  same_state "$tmp/dp-dump/rank-${pair%:*}.bin" "$tmp/dp2-dump/rank-${pair#*:}.bin" \
    || bad "dp: survivor rank ${pair%:*} differs from the resumed job's rank ${pair#*:}"
done
same_state "$tmp/dp-dump/rank-0.bin" "$tmp/dp-dump/rank-4.bin" || bad "dp: ranks 0 and 4 differ"

# 5b. Only rank 2 dies, as step 7's all-reduce across replicas begins (after the reduce-scatter
# inside its replica): the outer group of coordinate 0 (ranks 0, 2, 4) fails, that of
# coordinate 1 (ranks 1, 3, 5) completes, and ranks 1 and 5 then wait for ranks 0 and 4 in the
# sums inside their replicas. Ranks 0 and 4 take the failure up only at the step's verdict, after
# those sums, so replicas 0 and 2 go on whole, redo step 7 and end as in (5).
HOLMES_TEST_KILL_IN_OUTER_SYNC=7:1:one HOLMES_TEST_DUMP_WEIGHTS=$(dumped one) run "$tmp/one" "$steps" --nproc-per-node 6 \
  "${base[@]}" --set parallel.elastic=true "${dp[@]}" "${quiet[@]}" --set cluster.timeout_s=120
replica_1_pair_lost one
for r in 0 1 4 5; do
  same_state "$tmp/dp-dump/rank-$r.bin" "$tmp/one-dump/rank-$r.bin" || bad "one: rank $r differs from dp's"
done

# 6. Replica 1 frozen.
start=$(date +%s)
HOLMES_TEST_SIGNAL_AFTER_STEP=6:STOP:1 HOLMES_TEST_DUMP_WEIGHTS=$(dumped frozen) run "$tmp/frozen" "$steps" "${el[@]}" \
  "${quiet[@]}" --set cluster.timeout_s=5
echo "frozen: the job ended $(( $(date +%s) - start )) s after it started (cluster.timeout_s 5)"
expect_loss_of_1 frozen
grep -q "Timed out waiting 5000ms" "$tmp/frozen.log" || bad "frozen: not found by the time-out" "$tmp/frozen.log"
grep -q "rank 1 (pid [0-9]*) still running 2 s after the elastic job finished without it; sending SIGKILL" \
  "$tmp/frozen.log" || bad "frozen: the launcher did not end the frozen worker" "$tmp/frozen.log"
same_state "$tmp/redo-dump/rank-0.bin" "$tmp/frozen-dump/rank-0.bin" || bad "frozen: state differs from redo's"

# 6b. Replica 1 frozen inside the commit of checkpoint 6 (after the ranks met to commit it):
# the others, waiting there for its file entry, find it gone when its heartbeat is older than
# cluster.timeout_s (not after the commit's own wait of 60 s), regroup after step 6 and save
# checkpoint 6 again by themselves; the job ends with the state of (3).
HOLMES_TEST_SIGNAL_AFTER_STEP=6:STOP:1:commit HOLMES_TEST_DUMP_WEIGHTS=$(dumped cfrozen) run "$tmp/cfrozen" "$steps" \
  "${el[@]}" --set cluster.timeout_s=5 --set checkpoint.interval=6 --set checkpoint.background_write=false
expect_loss_of_1 cfrozen
grep -q "checkpoint after step 6 not saved: a rank it waited for will not come (.*rank 1: its last heartbeat was" \
  "$tmp/cfrozen.log" || bad "cfrozen: the commit's wait did not end on rank 1's heartbeat" "$tmp/cfrozen.log"
for s in 6 12; do
  m=$tmp/cfrozen/checkpoints/$(printf 'step-%08d' "$s")
  [ -f "$m/COMMITTED" ] && grep -q '"world": 2,' "$m/manifest.json" ||
    bad "cfrozen: checkpoint $s not committed by the 2 survivors" "$tmp/cfrozen.log"
done
same_state "$tmp/ck-dump/rank-0.bin" "$tmp/cfrozen-dump/rank-0.bin" || bad "cfrozen: state differs from ck's"

# 7. Replica 0 (rank 0, the job's leader) killed after the committed checkpoint of step 6, before
# its row 6: replicas 1 and 2 go on, rank 1 leads (row 6 on, the final weights, the manifests),
# every step has one row, and the state is that of (3), whose survivors hold the same places
# (coordinates 0 and 1) over the same data: weights and moments bit for bit, the survivors'
# checkpoint 12 the same shard files byte for byte.
HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:0 HOLMES_TEST_DUMP_WEIGHTS=$(dumped zero) run "$tmp/zero" "$steps" "${el[@]}" \
  --set checkpoint.interval=6 --set checkpoint.background_write=false
[ "$rc" -eq 0 ] || bad "zero: exit $rc without replica 0, expected 0" "$tmp/zero.log"
zero_rows="1:0,1,2 2:0,1,2 3:0,1,2 4:0,1,2 5:0,1,2 6:0,1,2 7:1,2 8:1,2 9:1,2 10:1,2 11:1,2 12:1,2"
[ "$(rows zero)" = "$zero_rows" ] || bad "zero: rows name replicas '$(rows zero)'" "$tmp/zero.log"
grep -q "rank 1: elastic: lost replica 0 (rank 0) (missing rank(s) \[0\]); generation 1: replicas \[1, 2\] go on from step 7" \
  "$tmp/zero.log" || bad "zero: the loss of replica 0 is not named" "$tmp/zero.log"
grep -q "rank 1: leads the job from step 6 (the lowest rank training now)" "$tmp/zero.log" ||
  bad "zero: rank 1 does not say it leads" "$tmp/zero.log"
[ -s "$tmp/zero/final/model.bin" ] || bad "zero: no final weights" "$tmp/zero.log"
grep -q "^\[rank 1\] step 12/12 | loss" "$tmp/zero.log" || bad "zero: rank 1 did not log the last step" "$tmp/zero.log"
same_state "$tmp/zero-dump/rank-1.bin" "$tmp/zero-dump/rank-2.bin" || bad "zero: survivors' states differ"
same_state "$tmp/ck-dump/rank-0.bin" "$tmp/zero-dump/rank-1.bin" || bad "zero: state differs from ck's"
m=$tmp/zero/checkpoints/step-00000012
[ -f "$m/COMMITTED" ] && grep -q '"world": 2,' "$m/manifest.json" || bad "zero: checkpoint 12 not saved by the survivors"
for f in rank-00000.bin rank-00001.bin; do
  cmp -s "$m/$f" "$tmp/ck/checkpoints/step-00000012/$f" || bad "zero: checkpoint 12 $f differs from ck's"
done

# 8. Rejoin. Replica 1 killed after step 6; once the survivors went on, its rank is started
# again by hand with the job's variables. The survivors admit it at the update of step 9
# (HOLMES_TEST_WAIT_FOR_JOINER holds that verdict until it asks, so the test does not depend on
# the machine's speed) and it takes replica 0's state over the new outer group.
# cluster.timeout_s 30: the first rank holds step 9's verdict at most that long for the joiner,
# which has to start and rendezvous on a machine that may be loaded.
rejoin_by_hand 9 "${tiny[@]}" --set job.output_dir="$tmp/join" --set train.steps="$steps" "${base[@]}" \
  --set parallel.elastic=true --set cluster.timeout_s=30
dump=$tmp/join-dump
want="1:0,1,2 2:0,1,2 3:0,1,2 4:0,1,2 5:0,1,2 6:0,1,2 7:0,2 8:0,2 9:0,2 10:0,1,2 11:0,1,2 12:0,1,2"
[ "$(rows join)" = "$want" ] || bad "join: rows name replicas '$(rows join)'" "$tmp/join.log"
# At the join: the joiner's weights and AdamW moments are replica 0's, bit for bit.
same_state "$dump/join-rank-0.bin" "$dump/join-rank-1.bin" || bad "join: the joiner's state differs from its peer's"
for r in 1 2; do same_state "$dump/rank-0.bin" "$dump/rank-$r.bin" || bad "join: rank $r's final state differs"; done

# 8b. Replica 0 (the leader) killed after step 6 and started again by hand: rank 1 leads while
# it is out; admitted at the update of step 9, rank 0 takes rank 1's state (the first replica
# that trained on) bit for bit, and leads again from step 10: every step one row, all equal.
rm -rf "$tmp/join" "$tmp/join-dump"
REJOIN_RANK=0 rejoin_by_hand 9 "${tiny[@]}" --set job.output_dir="$tmp/join" --set train.steps="$steps" "${base[@]}" \
  --set parallel.elastic=true --set cluster.timeout_s=30
want="1:0,1,2 2:0,1,2 3:0,1,2 4:0,1,2 5:0,1,2 6:0,1,2 7:1,2 8:1,2 9:1,2 10:0,1,2 11:0,1,2 12:0,1,2"
[ "$(rows join)" = "$want" ] || bad "join0: rows name replicas '$(rows join)'" "$tmp/join.log"
grep -q "rank 1: a lower rank rejoined and leads the job from step 10" "$tmp/join.log" ||
  bad "join0: rank 1 does not hand the log over" "$tmp/join.log"
grep -q "rank 0: leads the job from step 10" "$tmp/join-rank0.log" || bad "join0: rank 0 does not lead again" "$tmp/join-rank0.log"
same_state "$dump/join-rank-1.bin" "$dump/join-rank-0.bin" || bad "join0: the joiner's state differs from its peer's"
for r in 1 2; do same_state "$dump/rank-0.bin" "$dump/rank-$r.bin" || bad "join0: rank $r's final state differs"; done
[ -s "$tmp/join/final/model.bin" ] || bad "join0: no final weights" "$tmp/join.log"

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
