#!/usr/bin/env bash
# Rejoining a replica of several ranks (parallel.elastic, docs/elastic.md "Rejoin") through the
# binary with real processes: 3 diloco replicas x 2 ranks, inner_steps 4 (outer syncs after
# steps 4, 8, 12, 16), bf16 payloads.
# (1) --max-restarts is refused (exit 2, naming the flag) outside an elastic job, in one
#     without replicas (a re-planned pipeline) and with a negative value.
# (2) Data 2 inside each replica (ranks 2, 3 = replica 1): rank 2 killed after step 6, rank 3
#     fails in its data-parallel group; once replicas [0, 2] went on, both ranks are started
#     again by hand. The survivors admit replica 1 at the outer sync after step 12
#     (HOLMES_TEST_WAIT_FOR_JOINER holds that verdict until both ranks asked, so the test does
#     not depend on the machine's speed; after step 8 where they asked before it). The joiners
#     make their data-parallel group under the new generation's name and each takes the state
#     of replica 0's rank at its coordinate (rank 0 -> 2, rank 1 -> 3): weights, AdamW moments
#     and outer state equal bit for bit at the join; rows 1-7 name [0, 1, 2], then [0, 2] up to
#     the join, then [0, 1, 2], each step once; the six ranks end with equal weights.
# (3) Under the launcher with --max-restarts 1, pipeline 2 inside each replica (rank 2, stage 0
#     of replica 1, killed after step 6), then tensor 2 (rank 3 killed): the launcher starts the
#     killed rank again, and its replica's other rank after it failed, saying so; replica 1
#     rejoins at an outer sync (after step 12 or 8, as above): at the join rank 2 equals rank 0
#     and rank 3 equals rank 1 bit for bit; rows as above; the ranks of each stage (tensor
#     slice) end with equal weights; the job exits 0.
# (4) A joiner lost during its join (rank 3 exits once admitted): the survivors meet it making
#     the join's groups and go on without replica 1 to the end, equal.
# (5) Two replicas of one rank: replica 0, alone after losing replica 1, still admits it back
#     at its outer syncs (rank 1 started again by the launcher).
# Usage: elastic_rejoin.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
. "$(dirname "$0")/elastic_common.bash"
export HOLMES_LAUNCH_GRACE_S=5
steps=16
base=(--set parallel.replicas=3 --set parallel.outer=diloco --set parallel.inner_steps=4
  --set parallel.outer_dtype=bf16 --set train.global_batch=12 --set checkpoint.interval=0 --set cluster.timeout_s=60
  --set log.interval=1 --set parallel.elastic=true)

# want_rows JOIN [ALL WITHOUT]: the rows of a job that lost replica 1 in step 7 and took it back
# after step JOIN: ALL (default 0,1,2) up to step 7 and after JOIN, WITHOUT (0,2) between.
want_rows() {
  local s out="" all=${2:-0,1,2} without=${3:-0,2}
  for s in $(seq 1 "$steps"); do
    if [ "$s" -le 7 ] || [ "$s" -gt "$1" ]; then out+="$s:$all "; else out+="$s:$without "; fi
  done
  echo "${out% }"
}
# admitted NAME: ranks 2 and 3 were admitted together into generation 2 after the outer sync
# after step 12 (HOLMES_TEST_WAIT_FOR_JOINER), or after step 8 when they asked before it; sets join.
admitted() {
  join=$(sed -n 's/.*rank 2: elastic: admitted after step \([0-9]*\); generation 2: replicas \[0, 1, 2\]$/\1/p' "$tmp/$1.log" | head -1)
  [ "$1" = two ] && join=$(sed -n 's/.*rank 1: elastic: admitted after step \([0-9]*\); generation 2: replicas \[0, 1\]$/\1/p' "$tmp/$1.log" | head -1)
  [ "$1" = two ] || grep -q "rank 3: elastic: admitted after step ${join:-none}; generation 2: replicas \[0, 1, 2\]" \
    "$tmp/$1.log" || bad "$1: ranks 2 and 3 not admitted together" "$tmp/$1.log"
  case "${join:-x}" in 8|12) ;; *) bad "$1: replica 1 admitted after step '${join:-}', expected 12 (or 8)" "$tmp/$1.log" ;; esac
}
# wait_for FILE PATTERN: up to 300 s (a loaded machine) until FILE holds a line matching PATTERN.
wait_for() {
  for _ in $(seq 3000); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# 1. Bad input.
run "$tmp/bad" 4 --nproc-per-node 2 --max-restarts 1
[ "$rc" -eq 2 ] || bad "--max-restarts without elastic: exit $rc, expected 2" "$tmp/bad.log"
grep -q -- "--max-restarts 1 .*parallel.elastic" "$tmp/bad.log" || bad "--max-restarts without elastic: not explained" "$tmp/bad.log"
rm -f "$tmp/bad.log"
run "$tmp/bad" 4 --nproc-per-node 2 --set parallel.elastic=true --max-restarts 1
[ "$rc" -eq 2 ] || bad "--max-restarts without replicas: exit $rc, expected 2" "$tmp/bad.log"
grep -q -- "--max-restarts 1 .*parallel.replicas 1" "$tmp/bad.log" || bad "--max-restarts without replicas: not explained" "$tmp/bad.log"
rm -f "$tmp/bad.log"
run "$tmp/bad" 4 --nproc-per-node 6 "${base[@]}" --set parallel.data=2 --max-restarts -1
[ "$rc" -eq 2 ] || bad "--max-restarts -1: exit $rc, expected 2" "$tmp/bad.log"
grep -q -- "--max-restarts" "$tmp/bad.log" || bad "--max-restarts -1: the flag is not named" "$tmp/bad.log"

# by_hand NAME [VAR=VALUE...] -- [--set KEY=VALUE...]: the job with data 2 under the launcher, rank 2
# killed after step 6; once replicas [0, 2] went on and rank 3 stopped, ranks 2 and 3 started
# again by hand with the job's variables (and VAR=VALUE...); NAME.log has every rank's lines.
token="rejoin-test-$$"
by_hand() {
  local name=$1 port r
  shift
  local vars=()
  while [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  local job=("${tiny[@]}" --set job.output_dir="$tmp/$name" --set train.steps="$steps" "${base[@]}" --set parallel.data=2 "$@")
  dump=$(mkdir -p "$tmp/$name-dump" && echo "$tmp/$name-dump")
  MASTER_PORT=$port HOLMES_JOB_TOKEN=$token HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:2 HOLMES_TEST_WAIT_FOR_JOINER=12 \
    HOLMES_TEST_DUMP_WEIGHTS=$dump timeout 500 "$bin" --nproc-per-node 6 "${job[@]}" >"$tmp/$name.log" 2>&1 &
  local launcher=$!
  wait_for "$tmp/$name.log" "generation 1: replicas \[0, 2\] go on" || bad "$name: replicas [0, 2] did not go on" "$tmp/$name.log"
  wait_for "$tmp/$name.log" "rank 3 (pid [0-9]*) exited with code 1" || bad "$name: rank 3 did not stop" "$tmp/$name.log"
  local pids=()
  for r in 2 3; do
    env RANK=$r WORLD_SIZE=6 LOCAL_RANK=$r LOCAL_WORLD_SIZE=6 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      HOLMES_JOB_TOKEN=$token HOLMES_STORE_HOSTED=1 HOLMES_TEST_DUMP_WEIGHTS=$dump "${vars[@]}" \
      timeout 500 "$bin" "${job[@]}" >"$tmp/$name-rank$r.log" 2>&1 &
    pids+=($!)
  done
  for r in 0 1; do wait "${pids[$r]}"; hand_rc[$r]=$?; done
  wait "$launcher" || bad "$name: the job exited $?" "$tmp/$name.log"
  cat "$tmp/$name-rank2.log" "$tmp/$name-rank3.log" >>"$tmp/$name.log"
}

# 2. Data 2: replica 1's ranks started again by hand.
by_hand dp --
for r in 0 1; do [ "${hand_rc[$r]}" -eq 0 ] || bad "dp: the rejoining rank $((r + 2)) exited ${hand_rc[$r]}" "$tmp/dp.log"; done
admitted dp
grep -q "rank 0: elastic: replica 1 (ranks 2, 3) rejoin(s) after step ${join:-none}; generation 2: replicas \[0, 1, 2\]" \
  "$tmp/dp.log" || bad "dp: the survivors do not name the rejoining replica" "$tmp/dp.log"
[ "$(rows dp)" = "$(want_rows "${join:-0}")" ] || bad "dp: rows name replicas '$(rows dp)'" "$tmp/dp.log"
same_at_join "$dump" 0 2 || bad "dp: rank 2's state at the join differs from rank 0's"
same_at_join "$dump" 1 3 || bad "dp: rank 3's state at the join differs from rank 1's"
for r in 1 2 3 4 5; do same_weights "$dump/rank-0.bin" "$dump/rank-$r.bin" || bad "dp: rank $r's final weights differ"; done

# 3. Restarted by the launcher: restarted NAME KILLED OTHER DEGREE-SETTINGS...: rank KILLED of
# replica 1 killed after step 6, started again by the launcher, and rank OTHER after it failed.
restarted() {
  local name=$1 killed=$2 other=$3 r
  shift 3
  local dump
  dump=$(mkdir -p "$tmp/$name-dump" && echo "$tmp/$name-dump")
  HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:$killed HOLMES_TEST_WAIT_FOR_JOINER=12 HOLMES_TEST_DUMP_WEIGHTS=$dump \
    run "$tmp/$name" "$steps" --nproc-per-node 6 "${base[@]}" --set train.global_batch=6 "$@" --max-restarts 1
  [ "$rc" -eq 0 ] || bad "$name: exit $rc, expected 0" "$tmp/$name.log"
  grep -q "rank $killed (pid [0-9]*) was killed by signal 9 (Killed); elastic job: starting it again as a joiner (restart 1 of 1, pid [0-9]*)" \
    "$tmp/$name.log" || bad "$name: the launcher did not restart rank $killed" "$tmp/$name.log"
  grep -q "rank $other (pid [0-9]*) exited with code 1; elastic job: starting it again as a joiner (restart 1 of 1, pid [0-9]*)" \
    "$tmp/$name.log" || bad "$name: the launcher did not restart rank $other" "$tmp/$name.log"
  admitted "$name"
  [ "$(rows "$name")" = "$(want_rows "${join:-0}")" ] || bad "$name: rows name replicas '$(rows "$name")'" "$tmp/$name.log"
  same_at_join "$dump" 0 2 || bad "$name: rank 2's state at the join differs from rank 0's"
  same_at_join "$dump" 1 3 || bad "$name: rank 3's state at the join differs from rank 1's"
  # Ranks 0, 2, 4 hold the first pipeline stage or tensor slice, ranks 1, 3, 5 the second.
  for r in 2 4; do same_weights "$dump/rank-0.bin" "$dump/rank-$r.bin" || bad "$name: rank $r's final weights differ from rank 0's"; done
  for r in 3 5; do same_weights "$dump/rank-1.bin" "$dump/rank-$r.bin" || bad "$name: rank $r's final weights differ from rank 1's"; done
}
restarted pp 2 3 --set parallel.pipeline=2
restarted tp 3 2 --set parallel.tensor=2

# 4. A joiner lost during its join: ranks 2 and 3 started again by hand, rank 3 exits once
# admitted (HOLMES_TEST_EXIT_AFTER_ADMISSION). The survivors meet it making the join's groups,
# after cluster.timeout_s, and go on without replica 1: rows name [0, 2] from step 8 to the end,
# the job exits 0 and the survivors end with equal weights.
by_hand lost HOLMES_TEST_EXIT_AFTER_ADMISSION=3 -- --set cluster.timeout_s=10
grep -q "rank 0: elastic: lost replica 1 (ranks 2, 3) (missing rank(s) \[2, 3\]); generation 3: replicas \[0, 2\] go on" \
  "$tmp/lost.log" || bad "lost: the survivors did not go on without the lost joiner" "$tmp/lost.log"
[ "$(rows lost)" = "$(want_rows "$steps")" ] || bad "lost: rows name replicas '$(rows lost)'" "$tmp/lost.log"
for r in 1 4 5; do same_weights "$dump/rank-0.bin" "$dump/rank-$r.bin" || bad "lost: rank $r's final weights differ"; done

# 5. Two replicas of one rank: with replica 1 lost, replica 0 trains alone and its outer syncs
# still admit: rank 1, started again by the launcher, rejoins.
dump=$(mkdir -p "$tmp/two-dump" && echo "$tmp/two-dump")
HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:1 HOLMES_TEST_WAIT_FOR_JOINER=12 HOLMES_TEST_DUMP_WEIGHTS=$dump \
  run "$tmp/two" "$steps" --nproc-per-node 2 "${base[@]}" --set parallel.replicas=2 --set train.global_batch=4 \
  --max-restarts 1
[ "$rc" -eq 0 ] || bad "two: exit $rc, expected 0" "$tmp/two.log"
admitted two
[ "$(rows two)" = "$(want_rows "${join:-0}" 0,1 0)" ] || bad "two: rows name replicas '$(rows two)'" "$tmp/two.log"
same_at_join "$dump" 0 1 || bad "two: rank 1's state at the join differs from rank 0's"
same_weights "$dump/rank-0.bin" "$dump/rank-1.bin" || bad "two: final weights differ"

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
