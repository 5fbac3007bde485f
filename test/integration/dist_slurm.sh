#!/usr/bin/env bash
# The Slurm launch modes, with the variables srun sets written by hand (no Slurm here):
# (1) one task per device: `srun --ntasks 4 holmes-train ...` on one node, tp2 x dp2;
# (2) one launcher task per node: `srun --ntasks-per-node 1 holmes-train --nproc-per-node 2`.
# The master is the first host of SLURM_JOB_NODELIST and the port is derived from the job id
# (no MASTER_* variables); the losses match the single-process run.
# Usage: dist_slurm.sh <holmes-train> <source dir>
set -u
bin=$1
tmp=$(mktemp -d)
source "$(dirname "$0")/dist_common.bash"
host=$(hostname)
job_id=$(( 100000 + RANDOM ))  # the derived port depends on it: distinct per test run
short=("${tiny_job[@]}" --set train.steps=6)

# slurm_task PROCID NTASKS LOCALID STEP [args...]: one task as srun starts it on this node
slurm_task() {
  local procid=$1 ntasks=$2 localid=$3 step=$4
  shift 4
  env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT -u HOLMES_JOB_TOKEN \
    SLURM_JOB_ID=$job_id SLURM_STEP_ID=$step SLURM_PROCID=$procid SLURM_NTASKS=$ntasks SLURM_LOCALID=$localid \
    SLURM_NODEID=0 SLURM_NNODES=1 SLURM_JOB_NODELIST="$host" SLURM_STEP_NODELIST="$host" \
    SLURM_TASKS_PER_NODE="$ntasks" SLURM_STEP_TASKS_PER_NODE="$ntasks" timeout 120 "$exe" "$@"
}

timeout 60 "$exe" "${short[@]}" --set job.output_dir="$tmp/single" >"$tmp/single.log" 2>&1 ||
  bad "single: failed" "$tmp/single.log"

# 1. srun --ntasks 4: four workers, ranks from SLURM_PROCID.
pids=()
for r in 0 1 2 3; do
  slurm_task $r 4 $r 0 "${short[@]}" --set parallel.tensor=2 --set parallel.pipeline=1 --set parallel.data=2 \
    --set job.output_dir="$tmp/tasks" >"$tmp/tasks.$r.log" 2>&1 &
  pids+=($!)
done
for r in 0 1 2 3; do wait "${pids[$r]}" || bad "tasks: rank $r failed" "$tmp/tasks.$r.log"; done
grep -q "Plan: 4 ranks = tensor 2 x pipeline 1 x data 2" "$tmp/tasks.0.log" || bad "tasks: no plan" "$tmp/tasks.0.log"
matches_single tasks 6 || bad "tasks: losses differ from the single process"

# 2. One launcher task on the node spawning two workers.
slurm_task 0 1 0 1 "${short[@]}" --set parallel.tensor=1 --set parallel.pipeline=2 --set parallel.data=1 \
  --set job.output_dir="$tmp/launcher" --nproc-per-node 2 >"$tmp/launcher.log" 2>&1 ||
  bad "launcher: failed" "$tmp/launcher.log"
matches_single launcher 6 || bad "launcher: losses differ from the single process"
no_leftovers "slurm"
finish
