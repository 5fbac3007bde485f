#!/usr/bin/env bash
# The store of an elastic job outlives rank 0's process (docs/elastic.md "The store and the
# launchers"): every rank started by hand with torchrun-style variables (no launcher of
# holmes-train), so rank 0 would serve the TCP store itself; it has it served by a process of its
# own (`holmes-train store`). 3 sync replicas, 12 steps, cluster.timeout_s 10.
# (1) Rank 0 killed after step 6: ranks 1 and 2 go on and exit 0, rank 1 leads (every step one
#     row, rows 7-12 naming replicas [1, 2]), they end with equal weights and AdamW moments, and
#     once they left the keeper ends by itself: no process of the test is left, the port is free.
# (2) 3 replicas x data 2: rank 1 killed after step 6, so rank 0 leaves through its replica's
#     failure (exit 1) while ranks 2-5 go on: they finish, save checkpoints 8 and 12 and end equal
#     (ranks 2 and 4, 3 and 5); run twice.
# (3) Rank 0 killed after step 6 and started again by hand with the same variables: it finds the
#     running job's store on the port, is admitted after step 9 and leads again from step 10;
#     every step one row; the three ranks end equal.
# (4) `holmes-train store` by hand: without HOLMES_JOB_TOKEN exit 2 naming it; with it, a job
#     whose ranks all connect to it (HOLMES_STORE_HOSTED=1, rank 0 included) trains and the
#     store then ends with 0 by itself; a second one on the same port exits 3 saying it is taken.
# Usage: elastic_store.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
. "$(dirname "$0")/elastic_common.bash"
steps=12
base=(--set parallel.replicas=3 --set parallel.outer=sync --set checkpoint.interval=0 --set cluster.timeout_s=10
  --set log.interval=1 --set parallel.elastic=true --set train.steps=$steps)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# start NAME RANK WORLD PORT ARGS...: rank RANK of job NAME (output $tmp/NAME) in the background,
# torchrun-style; its output in $tmp/NAME-r<RANK>.log, its pid in pid[RANK].
declare -a pid
start() {
  local name=$1 r=$2 world=$3 port=$4
  shift 4
  RANK=$r WORLD_SIZE=$world LOCAL_RANK=$r LOCAL_WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    HOLMES_JOB_TOKEN="store-test-$$" timeout 300 "$bin" "${tiny[@]}" --set job.output_dir="$tmp/$name" "$@" \
    >"$tmp/$name-r$r.log" 2>&1 &
  pid[r]=$!
}
# ended NAME RANK WANT: rank RANK of job NAME exited WANT.
ended() {
  local code
  wait "${pid[$2]}"
  code=$?
  [ "$code" -eq "$3" ] || bad "$1: rank $2 exited $code, expected $3" "$tmp/$1-r$2.log"
}
# keeper_gone NAME PORT: no `store` process of this test left within 30 s (it ends 2 s after the
# last rank left), and PORT is free.
keeper_gone() {
  local _
  for _ in $(seq 300); do pgrep -f "$marker store" >/dev/null || break; sleep 0.1; done
  ! pgrep -af "$marker store" || bad "$1: the store's process is still running after the job" /dev/null
  python3 -c 'import socket, sys; s = socket.socket(); s.bind(("0.0.0.0", int(sys.argv[1])))' "$2" \
    || bad "$1: port $2 still taken after the job" /dev/null
}
want_rows() {  # want_rows NAME EXPECTED
  local got
  got=$(rows "$1")
  [ "$got" = "$2" ] || bad "$1: rows $got, expected $2" "$tmp/$1/metrics.jsonl"
}
lost_0="1:0,1,2 2:0,1,2 3:0,1,2 4:0,1,2 5:0,1,2 6:0,1,2 7:1,2 8:1,2 9:1,2 10:1,2 11:1,2 12:1,2"

# (1)
port=$(free_port)
dump=$(dumped one)
for r in 0 1 2; do
  HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:0 HOLMES_TEST_DUMP_WEIGHTS=$dump start one $r 3 "$port" "${base[@]}" \
    --set train.global_batch=6
done
ended one 0 137
ended one 1 0
ended one 2 0
grep -q "rank 0: elastic: the job's rendezvous store is served by a process of its own" "$tmp/one-r0.log" \
  || bad "one: rank 0 does not say who serves the store" "$tmp/one-r0.log"
grep -q "rank 1: elastic: lost replica 0 (rank 0) (missing rank(s) \[0\]); generation 1: replicas \[1, 2\] go on" \
  "$tmp/one-r1.log" || bad "one: the loss of replica 0 is not named" "$tmp/one-r1.log"
grep -q "rank 1: leads the job from step 6" "$tmp/one-r1.log" || bad "one: rank 1 does not lead" "$tmp/one-r1.log"
want_rows one "$lost_0"
same_weights "$dump/rank-1.bin" "$dump/rank-2.bin" || bad "one: ranks 1 and 2 differ" /dev/null
keeper_gone one "$port"
echo "ok: rank 0 killed, its store served on: ranks 1 and 2 finish equal, every step one row, the store then ends"

# (2)
for run in 1 2; do
  port=$(free_port)
  dump=$(dumped "pair$run")
  for r in 0 1 2 3 4 5; do
    HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:1 HOLMES_TEST_DUMP_WEIGHTS=$dump start "pair$run" $r 6 "$port" "${base[@]}" \
      --set parallel.data=2 --set train.global_batch=12 --set checkpoint.interval=4
  done
  ended "pair$run" 0 1
  ended "pair$run" 1 137
  for r in 2 3 4 5; do ended "pair$run" $r 0; done
  grep -q "rank 0: elastic: replica 0 lost rank(s) \[1\]" "$tmp/pair$run-r0.log" \
    || bad "pair$run: rank 0 does not say its replica lost rank 1" "$tmp/pair$run-r0.log"
  want_rows "pair$run" "$lost_0"
  for s in 8 12; do
    [ -f "$tmp/pair$run/checkpoints/$(printf 'step-%08d' "$s")/COMMITTED" ] || bad "pair$run: checkpoint $s not committed by the survivors" "$tmp/pair$run-r2.log"
  done
  same_weights "$dump/rank-2.bin" "$dump/rank-4.bin" || bad "pair$run: ranks 2 and 4 differ" /dev/null
  same_weights "$dump/rank-3.bin" "$dump/rank-5.bin" || bad "pair$run: ranks 3 and 5 differ" /dev/null
  keeper_gone "pair$run" "$port"
done
echo "ok: rank 0 leaves with its replica, the store stays: replicas 1 and 2 finish with checkpoints 8 and 12 (twice)"

# (3)
port=$(free_port)
dump=$(dumped again)
for r in 0 1 2; do
  HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:0 HOLMES_TEST_WAIT_FOR_JOINER=9 HOLMES_TEST_DUMP_WEIGHTS=$dump \
    start again $r 3 "$port" "${base[@]}" --set train.global_batch=6
done
for _ in $(seq 1200); do grep -q "generation 1: replicas \[1, 2\] go on" "$tmp/again-r1.log" && break; sleep 0.1; done
first=${pid[0]}
RANK=0 WORLD_SIZE=3 LOCAL_RANK=0 LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
  HOLMES_JOB_TOKEN="store-test-$$" HOLMES_TEST_DUMP_WEIGHTS=$dump timeout 300 "$bin" "${tiny[@]}" \
  --set job.output_dir="$tmp/again" "${base[@]}" --set train.global_batch=6 >"$tmp/again-rejoin.log" 2>&1
rc=$?
[ "$rc" -eq 0 ] || bad "again: the rank 0 started again exited $rc" "$tmp/again-rejoin.log"
pid[0]=$first
ended again 0 137
ended again 1 0
ended again 2 0
grep -q "rank 0: elastic: admitted after step 9; generation 2: replicas \[0, 1, 2\]" "$tmp/again-rejoin.log" \
  || bad "again: rank 0 not admitted after step 9" "$tmp/again-rejoin.log"
grep -q "rank 0: leads the job from step 10" "$tmp/again-rejoin.log" || bad "again: rank 0 does not lead again" \
  "$tmp/again-rejoin.log"
want_rows again "1:0,1,2 2:0,1,2 3:0,1,2 4:0,1,2 5:0,1,2 6:0,1,2 7:1,2 8:1,2 9:1,2 10:0,1,2 11:0,1,2 12:0,1,2"
same_weights "$dump/rank-0.bin" "$dump/rank-1.bin" || bad "again: ranks 0 and 1 differ" /dev/null
same_weights "$dump/rank-1.bin" "$dump/rank-2.bin" || bad "again: ranks 1 and 2 differ" /dev/null
keeper_gone again "$port"
echo "ok: rank 0 started again by hand finds the running job's store, rejoins after step 9 and leads"

# (4)
"$bin" store --port 1 >"$tmp/notoken.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q "HOLMES_JOB_TOKEN is not set" "$tmp/notoken.log" \
  || bad "store without a token: exit $rc, expected 2 naming HOLMES_JOB_TOKEN" "$tmp/notoken.log"
port=$(free_port)
HOLMES_JOB_TOKEN="store-test-$$" timeout 300 "$bin" store --port "$port" >"$tmp/by-hand.log" 2>&1 &
keeper=$!
for _ in $(seq 300); do grep -q "serving on port $port" "$tmp/by-hand.log" && break; sleep 0.1; done
HOLMES_JOB_TOKEN="store-test-$$" timeout 60 "$bin" store --port "$port" >"$tmp/taken.log" 2>&1
rc=$?
[ "$rc" -eq 3 ] && grep -q "cannot bind port $port" "$tmp/taken.log" \
  || bad "a second store on a taken port: exit $rc, expected 3 saying so" "$tmp/taken.log"
for r in 0 1 2; do HOLMES_STORE_HOSTED=1 start hand $r 3 "$port" "${base[@]}" --set train.global_batch=6; done
for r in 0 1 2; do ended hand $r 0; done
! grep -q "served by a process of its own" "$tmp/hand-r0.log" || bad "hand: rank 0 started a store of its own" \
  "$tmp/hand-r0.log"
wait "$keeper"
rc=$?
[ "$rc" -eq 0 ] || bad "hand: the store started by hand exited $rc after the job, expected 0" "$tmp/by-hand.log"
echo "ok: holmes-train store by hand serves a job to its end, refuses a missing token and a taken port"
