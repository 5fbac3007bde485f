#!/usr/bin/env bash
# How long a new user waits for the first training step: a fresh clone of this repository's
# HEAD, a fresh build folder, no compiler cache, then scripts/run.sh (the README's command)
# until its first "step" line. Prints the wall time to that line and the CPU time (user +
# sys) of the whole command, which a busy machine does not inflate as it does the wall time.
#   scripts/time_first_step.sh [WORK_DIR]      (default: a new temporary folder, removed after)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d)}
[ $# -gt 0 ] || trap 'rm -rf "$work"' EXIT
git clone -q "$src" "$work/clone"
cd "$work/clone"
export CCACHE_DISABLE=1
unset CMAKE_CXX_COMPILER_LAUNCHER CMAKE_CUDA_COMPILER_LAUNCHER
echo "time_first_step: $(git log --oneline -1); $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s%N)
first=0
TIMEFORMAT="%R s wall, %U s user + %S s sys CPU"
{ time scripts/run.sh --set train.steps=2 --set job.output_dir="$work/run" 2>&1; } 2>"$work/time.txt" |
  while IFS= read -r line; do
    if [ "$first" -eq 0 ] && [[ $line == step* ]]; then
      first=$(date +%s%N)
      echo "time_first_step: first step after $(( (first - t0) / 1000000000 )) s wall: $line"
    fi
  done
echo "time_first_step: the whole command (build + 2 steps): $(cat "$work/time.txt")"
echo "time_first_step: load average after $(cut -d' ' -f1-3 /proc/loadavg)"
