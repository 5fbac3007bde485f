#!/usr/bin/env bash
# One writer per run (issue 23), on every local file system kind the machine has (the test
# folder's, usually ext4 or overlay, and tmpfs under /dev/shm):
#   - while a run trains, the same job started again into its job.output_dir (fresh, with
#     --resume auto, through the launcher) is refused with exit 2, naming the live writer
#     (pid, host, since when) and not offering --resume auto; the first run goes on and its
#     metrics stay whole;
#   - the same while the first run is stopped in the middle of a checkpoint save: the save is
#     not described as another run;
#   - a writer killed with SIGKILL (mid-save too) never blocks the resume that follows, nor
#     does one killed during its very first save;
#   - a two-rank job's writer (rank 0) is named the same way.
# Usage: one_writer.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
. "$(dirname "$0")/ckpt_common.bash"
host=$(hostname)
pids=()
stop_all() { for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; kill -CONT "$p" 2>/dev/null; done; }
trap 'stop_all; rm -rf "$tmp" "${shm:-}"' EXIT

refused_by() {  # refused_by NAME LOG PID: exit 2, the live writer named, nothing else offered
  local name=$1 log=$2 pid=$3
  [ "$rc" -eq 2 ] || bad "$name: exit $rc, expected 2" "$log"
  grep -qF "is being written by another live process: pid $pid on $host, writing since " "$log" \
    || bad "$name: the live writer (pid $pid on $host) is not named" "$log"
  ! grep -q -- "--resume auto\|another run\|incomplete checkpoints" "$log" || bad "$name: misleading advice" "$log"
  ! grep -q '^step \|\[rank' "$log" || bad "$name: trained or spawned workers before refusing" "$log"
}
# start OUT [ARGS...]: a long run in the background; its pid in $pid once it has logged steps.
start() {
  local out=$1; shift
  "$bin" "${tiny[@]}" --set job.output_dir="$out" --set train.steps=1000000 "$@" >"$out.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 600); do
    [ -f "$out/metrics.jsonl" ] && [ "$(wc -l <"$out/metrics.jsonl")" -ge 2 ] && return 0
    sleep 0.05
  done
  bad "$out: the first run logged no steps" "$out.log"
}
# again OUT [ARGS...]: the same job once more into OUT (short); output in OUT.again.log, exit in $rc.
again() {
  local out=$1; shift
  "$bin" "${tiny[@]}" --set job.output_dir="$out" --set train.steps=20 "$@" >"$out.again.log" 2>&1
  rc=$?
}
metrics_whole() {
  python3 -c "import json, sys; [json.loads(l) for l in open(sys.argv[1])]" "$1/metrics.jsonl" 2>/dev/null \
    || bad "$1/metrics.jsonl no longer parses"
}
# stopped_mid_save OUT PID: SIGSTOPs PID at a moment a step folder of OUT has no COMMITTED marker.
stopped_mid_save() {
  local out=$1 pid=$2 d
  for _ in $(seq 400); do
    kill -STOP "$pid"
    for d in "$out"/checkpoints/step-*; do
      [ -d "$d" ] && [ ! -e "$d/COMMITTED" ] && return 0
    done
    kill -CONT "$pid"
    sleep 0.01
  done
  return 1
}

check_dir() {
  local root=$1 fs
  fs=$(stat -f -c %T "$root")
  # A live run, and the same job again: fresh, --resume auto, through the launcher.
  local a="$root/a"
  start "$a" --set checkpoint.interval=1
  local first=$pid
  again "$a" --resume auto
  refused_by "$fs: --resume auto beside a live run" "$a.again.log" "$first"
  again "$a"
  refused_by "$fs: a fresh start beside a live run" "$a.again.log" "$first"
  again "$a" --resume auto --nproc-per-node 2 --set parallel.data=2
  refused_by "$fs: the launcher beside a live run" "$a.again.log" "$first"
  # In the middle of a checkpoint save.
  if stopped_mid_save "$a" "$first"; then
    again "$a" --resume auto
    refused_by "$fs: --resume auto during a checkpoint save" "$a.again.log" "$first"
  else
    bad "$fs: never caught the first run in the middle of a save"
  fi
  # Killed there: the lock goes with it; the resume continues from the newest complete checkpoint.
  kill -KILL "$first"
  kill -CONT "$first" 2>/dev/null
  wait "$first" 2>/dev/null
  local newest
  newest=$(ls -d "$a"/checkpoints/step-*/COMMITTED | tail -1 | sed 's|.*/step-0*\([0-9]*\)/COMMITTED|\1|')
  again "$a" --resume auto --set train.steps=$((newest + 3))  # the last --set wins
  [ "$rc" -eq 0 ] || bad "$fs: resume after SIGKILL mid-save: exit $rc" "$a.again.log"
  grep -q "^resume: continuing from $a/checkpoints/step-" "$a.again.log" || bad "$fs: did not resume" "$a.again.log"
  metrics_whole "$a"

  # Killed during its very first save: its incomplete step folder is its own, not another run's.
  local k="$root/k"
  HOLMES_TEST_SIGNAL_AFTER_STEP=4:KILL run "$k" 8 --set checkpoint.interval=4
  [ "$rc" -eq 137 ] || bad "$fs: the first-save kill: exit $rc" "$k.log"
  run "$k" 8 --set checkpoint.interval=4 --resume auto
  [ "$rc" -eq 0 ] || bad "$fs: resume after a kill in the first save: exit $rc" "$k.log"

  # A two-rank job: rank 0 writes, and is named.
  local m="$root/m"
  start "$m" --nproc-per-node 2 --set parallel.data=2
  local launcher=$pid rank0
  rank0=$(sed -n 's/.*"pid": \([0-9]*\).*/\1/p' "$m/writer.lock")
  [ -n "$rank0" ] && [ "$rank0" != "$launcher" ] || bad "$fs: two ranks: the lock names pid '$rank0'" "$m.log"
  again "$m" --resume auto
  refused_by "$fs: --resume auto beside a two-rank run" "$m.again.log" "$rank0"
  kill -TERM "$launcher"
  wait "$launcher"
  again "$m" --resume auto --nproc-per-node 2 --set parallel.data=2
  [ "$rc" -eq 0 ] || bad "$fs: resume after the two-rank run stopped: exit $rc" "$m.again.log"
  metrics_whole "$m"
  echo "$fs ($root): live writers refused by name, dead ones never in the way"
}

check_dir "$tmp"
if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(stat -f -c %T /dev/shm)" != "$(stat -f -c %T "$tmp")" ]; then
  shm=$(mktemp -d /dev/shm/holmes-one-writer.XXXXXX)
  check_dir "$shm"
fi
[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
