#!/usr/bin/env bash
# parallel.elastic (docs/elastic.md) through the local launcher: 3 diloco replicas of one rank
# each, inner_steps 4 (outer syncs after steps 4, 8, 12, 16), bf16 payloads (so the exchange's
# error-feedback residuals are not zero and a redone exchange must start from the right ones).
# (1) Bad input exits 2 naming the key: elastic with the interleaved schedule, with
#     outer_overlap, with min_replicas above replicas (elastic sync replicas: elastic_sync.sh).
# (2) Without a failure an elastic job trains exactly as the same job without elastic: the
#     same losses bit for bit, every row naming replicas [0, 1, 2].
# (3) Replica 1 killed after step 6 (mid-period): the job finishes (exit 0) with replicas
#     [0, 2]: rows 1-7 name [0, 1, 2], rows 8-16 [0, 2]; the log names the lost replica and
#     rank; the two survivors' final weights are finite and equal bit for bit (after the last
#     sync); steps 1-7 equal the uninterrupted run's.
# (3b) The same with checkpoints every 3 steps: checkpoint 6, in flight when replica 1 dies, is
#     never committed, checkpoint 3 stays, the job finishes; the survivors save 9, 12, 15 and
#     16 by themselves, and the 3-replica job resumes their checkpoint 9.
# (3c) Replica 1 killed inside the commit of checkpoint 6: the commit's wait ends on its closed
#     store connection (not the time-out), checkpoint 6 stays uncommitted, and the survivors end
#     as in (3b).
# (4) Replica 1 killed as the outer sync after step 8 begins (the survivors fail inside the
#     exchange, roll back and redo it over replicas 0 and 2): the same final weights as (3),
#     bit for bit, since in both the exchange after step 8 averages replicas 0 and 2 and the
#     data stream continues alike.
# (4b) Replica 1 killed after the exchange's collectives, before the verdict: the first rank's
#     liveness watch names it from its closed store connection, long before the time-out.
# (5) Replica 1 frozen (SIGSTOP) after step 6, cluster.timeout_s 5: named after the groups'
#     time-out, and again the final weights of (3); the launcher ends the frozen worker once
#     the job finished without it.
#     The learning rate of every row is the schedule at the tokens seen (fewer per step after
#     the loss), not at the step count.
# (6) Losing replica 0 (rank 0, the leader): rank 1 takes over the log (every step one row, row
#     6 from its own step), the checkpoints and the final weights; falling below
#     parallel.min_replicas stops the job, saying why.
# (7) Two ranks per replica (data 2): rank 3 of replica 1 killed; rank 2 (its replica's other
#     rank) fails in its data-parallel group naming rank 3 and exits; replicas 0 and 2 (ranks
#     0, 1, 4, 5) finish with equal weights.
# (7b) Two ranks per replica, rank 2 alone killed before the sum across replicas ahead of the
#     outer sync after step 8 (one coordinate's outer group fails, the other's passes): the
#     survivors take it up as the exchange begins and end as in (7).
# (8) Rejoin: replica 1 killed after step 6, its rank started again by hand; admitted at the
#     outer sync after step 12, it takes replica 0's state over the network: at the join its
#     weights, AdamW moments and outer state equal replica 0's bit for bit; rows 13-16 name
#     [0, 1, 2]; the three replicas end with equal weights.
# (9) A replica behind when the loss is met (diloco replicas drift between syncs): it trains on
#     to the meeting where the loss was met and goes on with replica 0, not put apart.
# Usage: elastic.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
. "$(dirname "$0")/elastic_common.bash"
export HOLMES_LAUNCH_GRACE_S=2
steps=16
base=(--set parallel.replicas=3 --set parallel.outer=diloco --set parallel.inner_steps=4
  --set parallel.outer_dtype=bf16 --set train.global_batch=6 --set checkpoint.interval=0 --set cluster.timeout_s=10
  --set log.interval=1)
job=(--nproc-per-node 3 "${base[@]}")
el=("${job[@]}" --set parallel.elastic=true)

expect_loss_of_1() {  # NAME: exit 0, replicas [0, 2] from row 8 on, replica 1 and rank 1 named
  local name=$1
  [ "$rc" -eq 0 ] || { bad "$name: exit $rc, expected 0" "$tmp/$name.log"; return; }
  local want="1:0,1,2 2:0,1,2 3:0,1,2 4:0,1,2 5:0,1,2 6:0,1,2 7:0,1,2 8:0,2 9:0,2 10:0,2 11:0,2 12:0,2 13:0,2 14:0,2 15:0,2 16:0,2"
  [ "$(rows "$name")" = "$want" ] || bad "$name: rows name replicas '$(rows "$name")'" "$tmp/$name.log"
  grep -q "rank 0: elastic: lost replica 1 (rank 1) (missing rank(s) \[1\]); generation 1: replicas \[0, 2\] go on from step 9" \
    "$tmp/$name.log" || bad "$name: the loss of replica 1 is not named" "$tmp/$name.log"
  same_weights "$tmp/$name-dump/rank-0.bin" "$tmp/$name-dump/rank-2.bin" || bad "$name: survivors' weights differ"
  lr_by_tokens "$name" || bad "$name: the learning rate does not follow the tokens seen" "$tmp/$name.log"
}
# lr_by_tokens NAME: each row's learning rate is the job's warm-up and cosine decay at the
# tokens the job had seen before the step: 6 sequences a step through step 8 (the step in which
# the loss was met reads with the old layout), 4 after it; the decay ends at 16 x 6 sequences.
lr_by_tokens() {
  python3 - "$tmp/$1/metrics.jsonl" "$tmp/$1.log" <<'PY'
import json, math, re, sys
log = open(sys.argv[2]).read()
T = int(re.search(r"train: 16 steps x 6 sequences x (\d+) tokens", log).group(1))
top, low, warm, end = re.search(r"lr (\S+) -> (\S+) cosine by tokens seen with (\d+) warm-up tokens, decay to (\d+)",
                                log).groups()
top, low, warm, end = float(top), float(low), int(warm), int(end)
assert end == 16 * 6 * T, f"decay ends at {end} tokens"
rows = [r for r in map(json.loads, open(sys.argv[1])) if "step_ms" in r]
for r in rows:
    s = r["step"]
    seen, batch = T * (6 * min(s - 1, 8) + 4 * max(0, s - 9)), T * (6 if s <= 8 else 4)
    if seen < warm:
        want = top * (seen + batch) / warm
    else:
        want = low + 0.5 * (1 + math.cos(math.pi * (seen - warm) / (end - warm))) * (top - low)
    assert math.isclose(r["lr"], want, rel_tol=1e-9), f"step {s}: lr {r['lr']}, by tokens seen {want}"
PY
}

# 1. Bad input.
for bad_set in "parallel.schedule=interleaved" "parallel.outer_overlap=1" "parallel.min_replicas=4"; do
  run "$tmp/bad" 4 "${el[@]}" --set "$bad_set" --plan-only
  [ "$rc" -eq 2 ] || bad "$bad_set: exit $rc, expected 2" "$tmp/bad.log"
  key=parallel.elastic
  [ "$bad_set" = "parallel.min_replicas=4" ] && key=parallel.min_replicas
  grep -q "$key = .*accepted" "$tmp/bad.log" || bad "$bad_set: $key and what is accepted not named" "$tmp/bad.log"
  rm -f "$tmp/bad.log"
done

# 2. No failure: the same training as without elastic.
run "$tmp/plain" "$steps" "${job[@]}"
[ "$rc" -eq 0 ] || { bad "non-elastic reference: exit $rc" "$tmp/plain.log"; exit 1; }
HOLMES_TEST_DUMP_WEIGHTS=$(dumped ref) run "$tmp/ref" "$steps" "${el[@]}"
[ "$rc" -eq 0 ] || { bad "elastic, no failure: exit $rc" "$tmp/ref.log"; exit 1; }
same_losses "$tmp/plain/metrics.jsonl" 1 "$steps" "$tmp/ref/metrics.jsonl" || fail=1
[ "$(rows ref)" = "$(seq -s ' ' -f '%g:0,1,2' 1 16)" ] || bad "ref: rows name replicas '$(rows ref)'" "$tmp/ref.log"

# 3. Replica 1 killed mid-period.
HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:1 HOLMES_TEST_DUMP_WEIGHTS=$(dumped mid) run "$tmp/mid" "$steps" "${el[@]}"
expect_loss_of_1 mid
grep -q "rank 1 (pid [0-9]*) was killed by signal 9 .*elastic job: the other 2 worker(s) go on" "$tmp/mid.log" \
  || bad "mid: the launcher did not leave the survivors running" "$tmp/mid.log"
same_losses "$tmp/ref/metrics.jsonl" 1 7 "$tmp/mid/metrics.jsonl" || fail=1

# 3b. Checkpoints every 3 steps: checkpoint 6, written in the background when replica 1 dies
# after step 6, is never committed (its commit would wait for rank 1's files); the survivors
# find the loss at the check before that commit, and the job finishes; checkpoint 3 stays.
# The survivors save checkpoints 9, 12, 15 and 16 by themselves (2 ranks, no plan hash: they
# resume as another plan's), and the 3-replica job resumes checkpoint 9 and finishes.
HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:1 HOLMES_TEST_DUMP_WEIGHTS=$(dumped ckpt) run "$tmp/ckpt" "$steps" "${el[@]}" \
  --set checkpoint.interval=3
[ "$rc" -eq 0 ] || bad "ckpt: exit $rc, expected 0" "$tmp/ckpt.log"
[ -f "$tmp/ckpt/checkpoints/step-00000003/COMMITTED" ] || bad "ckpt: checkpoint 3 lost" "$tmp/ckpt.log"
[ ! -f "$tmp/ckpt/checkpoints/step-00000006/COMMITTED" ] || bad "ckpt: checkpoint 6 committed without rank 1" "$tmp/ckpt.log"
grep -q "checkpoint after step 6 not saved: a replica was lost while it was written" "$tmp/ckpt.log" ||
  bad "ckpt: the lost save not told" "$tmp/ckpt.log"
[ "$(rows ckpt | cut -d' ' -f7-8)" = "7:0,1,2 8:0,2" ] || bad "ckpt: rows name replicas '$(rows ckpt)'" "$tmp/ckpt.log"
for s in 9 12 15 16; do
  m=$tmp/ckpt/checkpoints/$(printf 'step-%08d' "$s")
  [ -f "$m/COMMITTED" ] || { bad "ckpt: checkpoint $s of the survivors not committed" "$tmp/ckpt.log"; continue; }
  grep -q '"world": 2,' "$m/manifest.json" && grep -q '"plan_hash": "0000000000000000"' "$m/manifest.json" ||
    bad "ckpt: checkpoint $s not recorded as saved by the 2 survivors" "$m/manifest.json"
done
run "$tmp/ckpt9" "$steps" "${el[@]}" --set checkpoint.resume="$tmp/ckpt/checkpoints/step-00000009"
[ "$rc" -eq 0 ] || bad "ckpt9: the 3-replica job did not resume the survivors' checkpoint 9: exit $rc" "$tmp/ckpt9.log"
grep -q "resume: continuing from .*step-00000009 at step 9 .*saved by 2 ranks, another plan: resharded" "$tmp/ckpt9.log" ||
  bad "ckpt9: not resumed from checkpoint 9" "$tmp/ckpt9.log"
[ "$(rows ckpt9 | wc -w)" -eq 7 ] || bad "ckpt9: rows $(rows ckpt9), expected steps 10..16" "$tmp/ckpt9.log"

# 3c. Rank 1 killed inside the commit of checkpoint 6 (after the ranks met to commit it, after
# step 7): the others, waiting there for its file entry, learn from its closed store connection
# that it will not come, leave checkpoint 6 uncommitted and regroup; the survivors' rows,
# checkpoints and final weights are those of (3b), where it died before the meeting.
HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:1:commit HOLMES_TEST_DUMP_WEIGHTS=$(dumped incommit) run "$tmp/incommit" "$steps" \
  "${el[@]}" --set checkpoint.interval=3
[ "$rc" -eq 0 ] || bad "incommit: exit $rc, expected 0" "$tmp/incommit.log"
grep -q "checkpoint after step 6 not saved: a rank it waited for will not come (.*rank 1: its process ended" \
  "$tmp/incommit.log" || bad "incommit: the commit's wait did not end on rank 1's closed connection" "$tmp/incommit.log"
[ ! -f "$tmp/incommit/checkpoints/step-00000006/COMMITTED" ] || bad "incommit: checkpoint 6 committed without rank 1"
[ "$(rows incommit | cut -d' ' -f7-8)" = "7:0,1,2 8:0,2" ] ||
  bad "incommit: rows name replicas '$(rows incommit)'" "$tmp/incommit.log"
for s in 3 9 12 15 16; do
  [ -f "$tmp/incommit/checkpoints/$(printf 'step-%08d' "$s")/COMMITTED" ] ||
    bad "incommit: checkpoint $s not committed" "$tmp/incommit.log"
done
same_weights "$tmp/ckpt-dump/rank-0.bin" "$tmp/incommit-dump/rank-0.bin" || bad "incommit: rank 0 differs from ckpt's"
same_weights "$tmp/incommit-dump/rank-0.bin" "$tmp/incommit-dump/rank-2.bin" || bad "incommit: the survivors differ"

# 4. Replica 1 killed in the outer exchange after step 8.
HOLMES_TEST_KILL_IN_OUTER_SYNC=8:1 HOLMES_TEST_DUMP_WEIGHTS=$(dumped sync) run "$tmp/sync" "$steps" "${el[@]}"
expect_loss_of_1 sync
grep -q "rank [02]: elastic: comm: send_recv on group 'outer0'" "$tmp/sync.log" \
  || bad "sync: the survivors did not fail inside the exchange" "$tmp/sync.log"
same_weights "$tmp/mid-dump/rank-0.bin" "$tmp/sync-dump/rank-0.bin" || bad "sync: weights differ from mid's"

# 4b. Replica 1 killed after the exchange's collectives, before it counts itself in to the
# verdict: the others wait on the store, not on a collective, and no group's time-out would end
# that wait before cluster.timeout_s (120 s here). The first rank's liveness watch finds the
# dead process's closed store connection and names it; the same weights as (4).
HOLMES_TEST_KILL_IN_OUTER_SYNC=8:1:verdict HOLMES_TEST_DUMP_WEIGHTS=$(dumped verdict) run "$tmp/verdict" "$steps" \
  "${el[@]}" --set cluster.timeout_s=120
expect_loss_of_1 verdict
grep -q "rank 0: elastic: another replica failed in the outer exchange after step 8 (rank 1 of replica 1: its process ended (its connection to the store closed))" \
  "$tmp/verdict.log" || bad "verdict: the dead rank is not named by the liveness watch" "$tmp/verdict.log"
same_weights "$tmp/mid-dump/rank-0.bin" "$tmp/verdict-dump/rank-0.bin" || bad "verdict: weights differ from mid's"

# 5. Replica 1 frozen.
start=$(date +%s)
HOLMES_TEST_SIGNAL_AFTER_STEP=6:STOP:1 HOLMES_TEST_DUMP_WEIGHTS=$(dumped frozen) run "$tmp/frozen" "$steps" "${el[@]}" \
  --set cluster.timeout_s=5
echo "frozen: the job ended $(( $(date +%s) - start )) s after it started (cluster.timeout_s 5)"
expect_loss_of_1 frozen
grep -q "never reached .* Timed out waiting 5000ms" "$tmp/frozen.log" || bad "frozen: not found by the time-out" "$tmp/frozen.log"
grep -q "rank 1 (pid [0-9]*) still running 2 s after the elastic job finished without it; sending SIGKILL" \
  "$tmp/frozen.log" || bad "frozen: the launcher did not end the frozen worker" "$tmp/frozen.log"
same_weights "$tmp/mid-dump/rank-0.bin" "$tmp/frozen-dump/rank-0.bin" || bad "frozen: weights differ from mid's"

# 6. Replica 0 (rank 0, the leader) killed after step 6, with the checkpoint of step 6 in
# flight: the survivors meet the loss before its commit (after step 7), rank 1 leads from row 7
# and writes row 6 from its own step (rank 0 died before logging it): every step one row; the
# survivors save checkpoints 9-16, and end with equal weights.
HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:0 HOLMES_TEST_DUMP_WEIGHTS=$(dumped zero) run "$tmp/zero" "$steps" "${el[@]}" \
  --set checkpoint.interval=3
[ "$rc" -eq 0 ] || bad "zero: exit $rc without replica 0, expected 0" "$tmp/zero.log"
[ "$(rows zero | tr ' ' '\n' | cut -d: -f1 | tr '\n' ' ')" = "$(seq -s ' ' 1 "$steps") " ] ||
  bad "zero: not one row per step: '$(rows zero)'" "$tmp/zero.log"
[ "$(rows zero | cut -d' ' -f6-9)" = "6:0,1,2 7:0,1,2 8:1,2 9:1,2" ] || bad "zero: rows name replicas '$(rows zero)'" "$tmp/zero.log"
grep -q "rank 1: leads the job from step 7 (the lowest rank training now): .*; rows 6-6 written from this rank's steps" \
  "$tmp/zero.log" || bad "zero: rank 1 does not take over the log" "$tmp/zero.log"
for s in 3 9 12 15 16; do
  [ -f "$tmp/zero/checkpoints/$(printf 'step-%08d' "$s")/COMMITTED" ] || bad "zero: checkpoint $s not committed" "$tmp/zero.log"
done
[ -s "$tmp/zero/final/model.bin" ] || bad "zero: no final weights" "$tmp/zero.log"
same_weights "$tmp/zero-dump/rank-1.bin" "$tmp/zero-dump/rank-2.bin" || bad "zero: the survivors differ"
# Below parallel.min_replicas the job stops.
HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:1 run "$tmp/quorum" "$steps" "${el[@]}" --set parallel.min_replicas=3
[ "$rc" -ne 0 ] || bad "quorum: exit 0 below min_replicas" "$tmp/quorum.log"
grep -q "rank 0: elastic: the job cannot go on after losing replica 1 (rank 1): only 2 whole replica(s) \[0, 2\] remain, parallel.min_replicas is 3" \
  "$tmp/quorum.log" || bad "quorum: the reason is not given" "$tmp/quorum.log"

# 7. Two ranks per replica: rank 3 of replica 1 dies, rank 2 stops naming it.
HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:3 HOLMES_TEST_DUMP_WEIGHTS=$(dumped dp) run "$tmp/dp" "$steps" --nproc-per-node 6 \
  "${base[@]}" --set parallel.elastic=true --set parallel.data=2 --set train.global_batch=12
grep -q "rank 2: comm: .* on group 'dp1' .*, peer rank 3" "$tmp/dp.log" || bad "dp: rank 2 does not name rank 3" "$tmp/dp.log"
replica_1_pair_lost dp
for r in 1 4 5; do
  same_weights "$tmp/dp-dump/rank-0.bin" "$tmp/dp-dump/rank-$r.bin" || bad "dp: rank $r's weights differ from rank 0's"
done

# 7b. Two ranks per replica: rank 2 alone dies before the sum across replicas that precedes the
# outer sync after step 8. The outer group of coordinate 0 (ranks 0, 2, 4) fails there, that of
# coordinate 1 (1, 3, 5) passes, and ranks 1 and 5 then need ranks 0 and 4 in the update's
# collectives inside their replicas: ranks 0 and 4 take the failure up only as the exchange
# begins. Replicas 0 and 2 go on whole, and end as in (7) (there too the exchange after step 8
# is the first without replica 1).
HOLMES_TEST_KILL_IN_OUTER_SYNC=8:1:agree HOLMES_TEST_DUMP_WEIGHTS=$(dumped agree) run "$tmp/agree" "$steps" \
  --nproc-per-node 6 "${base[@]}" --set parallel.elastic=true --set parallel.data=2 --set train.global_batch=12 \
  --set cluster.timeout_s=120
replica_1_pair_lost agree
for r in 0 1 4 5; do
  same_weights "$tmp/dp-dump/rank-$r.bin" "$tmp/agree-dump/rank-$r.bin" || bad "agree: rank $r's weights differ from dp's"
done

# 8. Rejoin. Replica 1 killed after step 6; once the survivors went on, its rank is started
# again by hand with the job's variables. The survivors admit it at the outer sync after step 12
# (HOLMES_TEST_WAIT_FOR_JOINER holds that sync's verdict until it asks, so the test does not
# depend on the machine's speed) and it takes replica 0's state over the new outer group.
rejoin_by_hand 12 "${tiny[@]}" --set job.output_dir="$tmp/join" --set train.steps="$steps" "${base[@]}" \
  --set parallel.elastic=true
dump=$tmp/join-dump
want="1:0,1,2 2:0,1,2 3:0,1,2 4:0,1,2 5:0,1,2 6:0,1,2 7:0,1,2 8:0,2 9:0,2 10:0,2 11:0,2 12:0,2 13:0,1,2 14:0,1,2 15:0,1,2 16:0,1,2"
[ "$(rows join)" = "$want" ] || bad "join: rows name replicas '$(rows join)'" "$tmp/join.log"
# At the join: the joiner's weights, AdamW moments and outer state are replica 0's, bit for bit.
same_at_join "$dump" 0 1 || bad "join: the joiner's state differs from its peer's"
for r in 1 2; do same_weights "$dump/rank-0.bin" "$dump/rank-$r.bin" || bad "join: rank $r's final weights differ"; done

# 9. A replica behind when the loss is met: log lines every 100 steps, so the replicas meet only
# at the outer syncs (every 4 steps) and drift apart between them; rank 1 is slowed (600 ms a
# forward pass). Replica 2 killed after step 4: replica 0 meets the loss in the sum before the
# sync after step 8 while replica 1 is steps behind; replica 1 reads the announcement, says it
# is coming, trains on to that sum and meets the loss there, so both register the same step:
# replicas [0, 1] go on (replica 1 not "apart"), the job exits 0, the two survivors end equal.
HOLMES_TEST_SIGNAL_AFTER_STEP=4:KILL:2 HOLMES_TEST_SLOW_RANK=1:600 HOLMES_TEST_DUMP_WEIGHTS=$(dumped behind) \
  run "$tmp/behind" "$steps" "${el[@]}" --set log.interval=100
[ "$rc" -eq 0 ] || bad "behind: exit $rc, expected 0" "$tmp/behind.log"
grep -q "rank 0: elastic: lost replica 2 (rank 2) (missing rank(s) \[2\]); generation 1: replicas \[0, 1\] go on from step 9" \
  "$tmp/behind.log" || bad "behind: replicas [0, 1] did not go on together" "$tmp/behind.log"
same_weights "$tmp/behind-dump/rank-0.bin" "$tmp/behind-dump/rank-1.bin" || bad "behind: survivors' weights differ"

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
