#!/usr/bin/env bash
# Failure of one worker mid-run. (1) The four ranks of a job are started by hand with
# torchrun-style variables; rank 2 is killed with SIGKILL after a few steps: every other rank
# exits non-zero within cluster.timeout_s (plus start-up slack), its stderr naming rank 2, and
# no process is left; with ranks 2 and 3 killed together under a 60 s time-out, ranks 0 and 1
# exit within 20 s; with rank 0 (the store host) killed, the others name rank 0. (2) The same
# through the local launcher: it exits 128+9 naming rank 2.
# (3) Rank 2 hangs (SIGSTOP) instead: the others give up after cluster.timeout_s (plus the
# seconds the groups take to find whom to blame), naming rank 2.
# Usage: dist_failure.sh <holmes-train> <source dir>
set -u
bin=$1
tmp=$(mktemp -d)
source "$(dirname "$0")/dist_common.bash"
timeout_s=5
long_job=("${tiny_job[@]}" --set train.steps=100000 --set cluster.timeout_s=$timeout_s
  --set parallel.tensor=2 --set parallel.pipeline=2 --set parallel.data=1)
steps_logged() { [ -s "$1" ] && [ "$(grep -c '"loss"' "$1")" -ge "$2" ]; }

# start_ranks NAME TOKEN [--set ...]: the four ranks of one job, started by hand with
# torchrun-style variables, each under `timeout 120` (their pids, the `timeout`s', in ranks[]),
# writing to $tmp/NAME and logging to $tmp/NAME.RANK.{out,err}.
start_ranks() {
  local name=$1 token=$2 port r
  shift 2
  port=$(free_port)
  ranks=()
  for r in 0 1 2 3; do
    RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port HOLMES_JOB_TOKEN=$token \
      timeout 120 "$exe" "${long_job[@]}" "$@" --set job.output_dir="$tmp/$name" \
      >"$tmp/$name.$r.out" 2>"$tmp/$name.$r.err" &
    ranks+=($!)
  done
}

# 1. torchrun-style ranks; 3: the same with rank 2 stopped instead of killed.
# env_case NAME SIGNAL SLACK_S
env_case() {
  local name=$1 sig=$2 slack=$3 r code took victim killed_at
  start_ranks "$name" failure-test
  if ! wait_for "steps_logged $tmp/$name/metrics.jsonl 3" 60; then
    bad "$name: no 3 steps within 60 s" "$tmp/$name.0.err"
  else
    victim=$(pgrep -P "${ranks[2]}" -f "$marker")  # rank 2's holmes-train (child of its `timeout`)
    kill "-$sig" "$victim"
    killed_at=$(date +%s)
    for r in 0 1 3; do
      wait "${ranks[$r]}"
      code=$?
      took=$(( $(date +%s) - killed_at ))
      [ "$code" -ne 0 ] || bad "$name: rank $r exited 0 after rank 2 got SIG$sig" "$tmp/$name.$r.err"
      [ "$code" -ne 124 ] || bad "$name: rank $r hung until the test's time limit" "$tmp/$name.$r.err"
      [ "$took" -le $(( timeout_s + slack )) ] || bad "$name: rank $r took $took s to exit (cluster.timeout_s=$timeout_s)"
      grep -q "holmes-train: rank $r: .*peer rank 2" "$tmp/$name.$r.err" ||
        bad "$name: rank $r does not name rank 2" "$tmp/$name.$r.err"
    done
    kill -KILL "$victim" 2>/dev/null
    wait "${ranks[2]}" 2>/dev/null
    echo "$name: ranks 0, 1, 3 stopped after rank 2 got SIG$sig:"
    grep -h "holmes-train: rank" "$tmp/$name".*.err | cut -c1-240
  fi
  no_leftovers "$name"
}
env_case killed KILL 5
env_case stopped STOP 8

# 1b. Two ranks killed at once, under a long time-out: the survivors see both at once, and
# rank 0, which hosts the store the ranks decide with, leaves once no other process is
# connected to it, not after cluster.timeout_s waiting for a verdict from a dead rank.
two_killed() {
  local r code took victims=() killed_at long=60
  start_ranks two failure-two --set cluster.timeout_s=$long
  if ! wait_for "steps_logged $tmp/two/metrics.jsonl 3" 60; then
    bad "two: no 3 steps within 60 s" "$tmp/two.0.err"
  else
    victims=("$(pgrep -P "${ranks[2]}" -f "$marker")" "$(pgrep -P "${ranks[3]}" -f "$marker")")
    kill -KILL "${victims[@]}"
    killed_at=$(date +%s)
    for r in 0 1; do
      wait "${ranks[$r]}"
      code=$?
      took=$(( $(date +%s) - killed_at ))
      [ "$code" -ne 0 ] && [ "$code" -ne 124 ] || bad "two: rank $r exit $code" "$tmp/two.$r.err"
      [ "$took" -le 20 ] || bad "two: rank $r took $took s to exit (cluster.timeout_s=$long)" "$tmp/two.$r.err"
    done
    wait "${ranks[2]}" "${ranks[3]}" 2>/dev/null
    echo "two: ranks 0 and 1 stopped within $took s after ranks 2 and 3 were killed:"
    grep -h "holmes-train: rank" "$tmp"/two.*.err | cut -c1-240
  fi
  no_leftovers "two"
}
two_killed

# 1c. Rank 0 killed: it hosts the store the ranks decide with, so the survivors cannot compare
# reports; the ranks next to it see its connections close, the others only a neighbour that
# gave up. Every survivor names rank 0: a store gone after a communication failure means its
# host is.
store_host_killed() {
  local r code took victim killed_at
  start_ranks host failure-host
  if ! wait_for "steps_logged $tmp/host/metrics.jsonl 3" 60; then
    bad "host: no 3 steps within 60 s" "$tmp/host.0.err"
  else
    victim=$(pgrep -P "${ranks[0]}" -f "$marker")
    kill -KILL "$victim"
    killed_at=$(date +%s)
    for r in 1 2 3; do
      wait "${ranks[$r]}"
      code=$?
      took=$(( $(date +%s) - killed_at ))
      [ "$code" -ne 0 ] && [ "$code" -ne 124 ] || bad "host: rank $r exit $code" "$tmp/host.$r.err"
      [ "$took" -le $(( timeout_s + 8 )) ] || bad "host: rank $r took $took s to exit (cluster.timeout_s=$timeout_s)"
      grep -q "holmes-train: rank $r: .*peer rank 0" "$tmp/host.$r.err" ||
        bad "host: rank $r does not name rank 0" "$tmp/host.$r.err"
    done
    wait "${ranks[0]}" 2>/dev/null
    echo "host: ranks 1, 2, 3 stopped after rank 0 (the store host) was killed:"
    grep -h "holmes-train: rank" "$tmp"/host.*.err | cut -c1-240
  fi
  no_leftovers "host"
}
store_host_killed

# 2. The local launcher with a killed worker.
timeout 120 "$exe" "${long_job[@]}" --set job.output_dir="$tmp/local" --nproc-per-node 4 >"$tmp/local.out" 2>&1 &
launcher=$!
if ! wait_for "steps_logged $tmp/local/metrics.jsonl 3" 60; then
  bad "local: no 3 steps within 60 s" "$tmp/local.out"
else
  victim=""
  for p in $(pgrep -f "$marker"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=2" && victim=$p
  done
  if [ -z "$victim" ]; then
    bad "local: no worker with RANK=2 found"
  else
    kill -KILL "$victim"
    killed_at=$(date +%s)
    wait "$launcher"
    code=$?
    took=$(( $(date +%s) - killed_at ))
    [ "$code" -eq 137 ] || bad "local: launcher exit $code, expected 137 (128 + SIGKILL of rank 2)" "$tmp/local.out"
    [ "$took" -le $(( timeout_s + 5 )) ] || bad "local: launcher took $took s to exit"
    grep -q "rank 2 (pid $victim) was killed by signal 9" "$tmp/local.out" || bad "local: rank 2 not named" "$tmp/local.out"
  fi
fi
no_leftovers "local"
finish
