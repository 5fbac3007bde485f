#!/usr/bin/env bash
# Rendezvous through a shared directory (cluster.rendezvous: file:///PATH) instead of rank 0's
# TCP store. Two ranks started by hand (torchrun-style variables, no MASTER_ADDR/PORT) train
# a dp2 job whose losses match the single process; the directory is left empty, so a second
# run with the same token and a third with another token use it again. A directory a killed
# job left behind is refused, naming it, to a job with another token; and a spec
# cluster.rendezvous of tcp://HOST:PORT works without MASTER_* variables.
# Usage: dist_rendezvous.sh <holmes-train> <source dir>
set -u
bin=$1
tmp=$(mktemp -d)
source "$(dirname "$0")/dist_common.bash"
rdzv="$tmp/rdzv"
job=("${tiny_job[@]}" --set train.steps=6 --set parallel.tensor=1 --set parallel.pipeline=1 --set parallel.data=2
  --set cluster.timeout_s=10)

# two_ranks NAME TOKEN URL: runs ranks 0 and 1; their exit codes in $tmp/NAME.codes
two_ranks() {
  local name=$1 token=$2 url=$3 pids=() r
  for r in 0 1; do
    env -u MASTER_ADDR -u MASTER_PORT RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r HOLMES_JOB_TOKEN=$token \
      timeout 60 "$exe" "${job[@]}" --set cluster.rendezvous="$url" --set job.output_dir="$tmp/$name" \
      >"$tmp/$name.$r.log" 2>&1 &
    pids+=($!)
  done
  : >"$tmp/$name.codes"
  for r in 0 1; do
    wait "${pids[$r]}"
    echo $? >>"$tmp/$name.codes"
  done
}

timeout 60 "$exe" "${tiny_job[@]}" --set train.steps=6 --set job.output_dir="$tmp/single" >"$tmp/single.log" 2>&1 ||
  bad "single: failed" "$tmp/single.log"

for run in "first tok-a" "again tok-a" "other tok-b"; do
  set -- $run
  two_ranks "$1" "$2" "file://$rdzv"
  [ "$(tr -d '\n' <"$tmp/$1.codes")" = "00" ] || bad "$1 ($2): exit codes $(tr '\n' ' ' <"$tmp/$1.codes")" "$tmp/$1.0.log"
  matches_single "$1" 6 || bad "$1: losses differ from the single process"
  left=$(ls -A "$rdzv" 2>/dev/null | tr '\n' ' ')
  [ -z "$left" ] || bad "$1: the rendezvous directory is not empty after the job: $left"
  echo "$1 ($2): file:// rendezvous, 2 ranks, losses match, directory left empty"
done

# A job killed mid-run leaves its keys and token; another job is told to remove them.
stale_job=("${job[@]}" --set train.steps=100000)
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r HOLMES_JOB_TOKEN=tok-killed timeout 60 "$exe" "${stale_job[@]}" \
    --set cluster.rendezvous="file://$rdzv" --set job.output_dir="$tmp/killed" >"$tmp/killed.$r.log" 2>&1 &
done
wait_for "[ -s $tmp/killed/metrics.jsonl ]" 60 || bad "killed: never started" "$tmp/killed.0.log"
pkill -KILL -f "$marker"
wait 2>/dev/null
two_ranks stale tok-c "file://$rdzv"
grep -q "file://$rdzv belongs to another job" "$tmp/stale.0.log" ||
  bad "stale: no message naming the stale directory" "$tmp/stale.0.log"
grep -q "^0$" "$tmp/stale.codes" && bad "stale: a rank exited 0 on a stale store" "$tmp/stale.0.log"

# tcp://HOST:PORT in the spec: rank 0 hosts the store there, no MASTER_* needed.
two_ranks tcp tok-d "tcp://127.0.0.1:$(free_port)"
[ "$(tr -d '\n' <"$tmp/tcp.codes")" = "00" ] || bad "tcp: exit codes $(tr '\n' ' ' <"$tmp/tcp.codes")" "$tmp/tcp.1.log"
matches_single tcp 6 || bad "tcp: losses differ from the single process"
no_leftovers "rendezvous"
finish
