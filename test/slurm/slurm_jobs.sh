#!/usr/bin/env bash
# holmes-train under a real Slurm: a private single-node cluster (slurm_cluster.bash) runs the
# example batch scripts of scripts/slurm/ as a user submits them, the site-specific #SBATCH
# values overridden on the sbatch command line (1 node, 4 GPUs, 1 core per task):
# (1) train_tasks.sbatch, 4 tasks, pp2 x dp2 of the default model: COMPLETED, losses match the
#     single process, rank 0's log names the Slurm job;
# (2) train_nodes.sbatch, one launcher task with --nproc-per-node 4, the same job: sent USR1
#     mid-run the way `#SBATCH --signal=B:USR1@120` sends it (to the batch shell only), it
#     saves, exits 138, requeues itself, and its second run resumes and completes with losses
#     bit-identical to (1);
# (3) holmes-train started by a batch script without srun: exit 2 naming the mistake;
# (4) `srun --ntasks 4 holmes-train`, one task SIGKILLed: srun ends in bounded time and the
#     output names rank 2;
# then everything is shut down, with nothing left running. HOLMES_SKIP where Slurm cannot run
# here (not root, packages not installable, daemons not starting).
# Usage: slurm_jobs.sh <holmes-train> <source dir>
set -u
bin=$1
src=$(readlink -f "$2")
if [ "$(id -u)" -ne 0 ]; then
  echo "HOLMES_SKIP: a private slurmctld/slurmd needs root (uid $(id -u))"
  exit 0
fi
if ! timeout 300 "$src/scripts/setup.sh" --packages slurm >/dev/null 2>&1; then
  echo "HOLMES_SKIP: could not install slurm-wlm and munge (scripts/setup.sh --packages slurm failed)"
  exit 0
fi
. "$src/test/integration/ckpt_common.bash"  # $tmp, same_losses
. "$src/test/integration/dist_common.bash"  # $exe (a uniquely named link), bad, matches_single, ...
. "$(dirname "$0")/slurm_cluster.bash"
trap 'slurm_down; cleanup' EXIT
trap 'exit 143' TERM INT HUP  # so that the daemons are stopped also then (EXIT runs)

steps=80
# The default model (configs/default.yaml), a short run; every rank logs every step.
job=(--set train.steps=$steps --set train.eval_interval=0 --set log.interval=1 --set checkpoint.interval=0
  --set data.synthetic.tokens=200000 --set cluster.device_tflops=1)
pp2dp2=(--set parallel.tensor=1 --set parallel.pipeline=2 --set parallel.data=2)
export HOLMES=$exe HOLMES_CONFIG=$src/configs/default.yaml  # the scripts' parameters
# What every submission overrides in the scripts: this machine is 1 node with 4 (fake) GPUs.
site=(--nodes=1 --gpus-per-node=4 --time=10 --chdir="$tmp")

timeout 120 "$exe" --config "$HOLMES_CONFIG" "${job[@]}" --set job.output_dir="$tmp/single" >"$tmp/single.log" 2>&1 ||
  bad "single process: failed" "$tmp/single.log"

if ! slurm_up "$tmp/slurm" 32 4; then
  echo "HOLMES_SKIP: Slurm cannot start here: $slurm_why"
  slurm_log_tail
  exit 0
fi
echo "slurm: cluster up ($(timeout 5 sinfo -h -N -o '%N %c CPUs %G'))"
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
since() { local ms; ms=$(ms_since "$1"); printf '%d.%03d' $(( ms / 1000 )) $(( ms % 1000 )); }

steps_logged() { cat "$tmp/$1/metrics.jsonl" 2>/dev/null | wc -l; }
# submit NAME SCRIPT SBATCH-OPTIONS... -- HOLMES-ARGS...: prints the job id
submit() {
  local name=$1 script=$2
  shift 2
  local opts=()
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done
  shift
  timeout 30 sbatch --parsable "${site[@]}" "${opts[@]}" --output="$tmp/$name.out" \
    "$src/scripts/slurm/$script" "$@" --set job.output_dir="$tmp/$name"
}

# (1) One task per GPU.
t0=$(date +%s%N)
id=$(submit tasks train_tasks.sbatch --ntasks-per-node=4 --cpus-per-task=1 -- "${job[@]}" "${pp2dp2[@]}")
state=$(wait_job "$id" 90) || bad "tasks: job $id still $state after 90 s"
echo "tasks: job $id $state in $(since "$t0") s"
[ "$state" = COMPLETED ] || bad "tasks: job $id ended $state, exit $(job_field "$id" ExitCode)" "$tmp/tasks.out"
grep -q "Plan: 4 ranks = tensor 1 x pipeline 2 x data 2" "$tmp/tasks.out" || bad "tasks: no pp2 x dp2 plan" "$tmp/tasks.out"
grep -q "launch: slurm rank 0/4 (node 0/1, local 0/4) master .*, Slurm job $id step 0$" "$tmp/tasks.out" ||
  bad "tasks: rank 0 does not name Slurm job $id" "$tmp/tasks.out"
matches_single tasks "$steps" || bad "tasks: losses differ from the single process"

# (2) One launcher per node; USR1 to the batch shell mid-run, as the time-limit warning does.
t0=$(date +%s%N)
id=$(submit nodes train_nodes.sbatch --cpus-per-task=4 -- "${job[@]}" "${pp2dp2[@]}")
wait_for '[ "$(steps_logged nodes)" -ge 2 ]' 60 ||
  bad "nodes: job $id logged no steps in 60 s" "$tmp/nodes.out"
timeout 10 scancel --signal=USR1 --batch "$id" || bad "nodes: scancel --signal=USR1 --batch $id failed"
state=$(wait_job "$id" 90) || bad "nodes: job $id still $state after 90 s"
echo "nodes: job $id $state after $(job_field "$id" Restarts) requeue(s), in $(since "$t0") s"
stop=$(sed -n 's/^\[rank 0\] stopped by signal 10 after step \([0-9]*\) of.*/\1/p' "$tmp/nodes.out")
if [ -z "$stop" ]; then
  bad "nodes: no stop line of rank 0 (did the job end before the signal?)" "$tmp/nodes.out"
else
  echo "nodes: stopped after step $stop, requeued, resumed"
  [ -f "$tmp/nodes/checkpoints/$(printf 'step-%08d' "$stop")/COMMITTED" ] || bad "nodes: no checkpoint at step $stop"
  grep -q "srun: error: .*: task 0: Exited with exit code 138" "$tmp/nodes.out" ||
    bad "nodes: the launcher task did not exit with 138" "$tmp/nodes.out"
  grep -q "^\[rank 0\] resume: continuing from .*step-$(printf '%08d' "$stop") at step $stop " "$tmp/nodes.out" ||
    bad "nodes: the second run did not continue at step $stop" "$tmp/nodes.out"
fi
[ "$state" = COMPLETED ] && [ "$(job_field "$id" Restarts)" = 1 ] ||
  bad "nodes: job $id ended $state after $(job_field "$id" Restarts) requeue(s), expected COMPLETED after 1" "$tmp/nodes.out"
grep -q "launch: torchrun rank 0/4 .*, Slurm job $id step 0, restart 1$" "$tmp/nodes.out" ||
  bad "nodes: the second run does not name job $id, restart 1" "$tmp/nodes.out"
# The same plan as (1), so the losses must be the same to the bit.
[ "$(grep -ho 'plan hash [0-9a-f]*' "$tmp/tasks.out" | sort -u)" = "$(grep -ho 'plan hash [0-9a-f]*' "$tmp/nodes.out" | sort -u)" ] ||
  bad "nodes: another plan than the tasks job's"
same_losses "$tmp/tasks/metrics.jsonl" 1 "$steps" "$tmp/nodes/metrics.jsonl" || bad "nodes: losses differ from (1)"

# (3) The mistake srun prevents: holmes-train started by the batch script itself, with the
# job's 4 tasks in its environment but no step: exit 2 at once, not a wait for 3 ranks.
id=$(timeout 30 sbatch --parsable --ntasks=4 --cpus-per-task=1 --chdir="$tmp" --output="$tmp/nosrun.out" \
  --wrap "$exe --config $HOLMES_CONFIG --set job.output_dir=$tmp/nosrun")
state=$(wait_job "$id" 30) || bad "no srun: job $id still $state after 30 s"
[ "$state" = FAILED ] && [ "$(job_field "$id" ExitCode)" = 2:0 ] ||
  bad "no srun: job $id ended $state, exit $(job_field "$id" ExitCode), expected FAILED with 2:0" "$tmp/nosrun.out"
grep -q "SLURM_STEP_ID is not: this is the batch script of job $id" "$tmp/nosrun.out" ||
  bad "no srun: no message" "$tmp/nosrun.out"
echo "no srun: job $id $state, exit $(job_field "$id" ExitCode)"

# (4) srun as a user types it; rank 2 is killed once the job is a few steps in.
timeout 90 srun --nodes=1 --ntasks=4 --cpus-per-task=1 --chdir="$tmp" "$exe" --config "$HOLMES_CONFIG" \
  "${job[@]}" "${pp2dp2[@]}" --set train.steps=100000 --set job.output_dir="$tmp/killed" >"$tmp/killed.out" 2>&1 &
srun_pid=$!
rank2=
wait_for '[ "$(steps_logged killed)" -ge 3 ]' 60 || bad "killed: no steps in 60 s" "$tmp/killed.out"
for pid in $(pgrep -f "$marker"); do
  tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qx "SLURM_PROCID=2" && rank2=$pid
done
if [ -z "$rank2" ]; then
  bad "killed: no process of task 2 found" "$tmp/killed.out"
  kill "$srun_pid"
else
  t0=$(date +%s%N)
  kill -KILL "$rank2"
  # Bounded here rather than by srun's time limit, so that a hang says where each rank is.
  if ! wait_for '! kill -0 "$srun_pid" 2>/dev/null' 30; then
    echo "killed: srun still running 30 s after task 2 was killed; its tasks:"
    for pid in $(pgrep -f "$marker"); do
      task=$(tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep "^SLURM_PROCID=") || continue
      echo "  pid $pid $task, state $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)"
      command -v gdb >/dev/null &&
        timeout 30 gdb -p "$pid" -batch -ex 'thread apply all bt' 2>/dev/null | grep -E '^#[0-9]+ .* in (holmes|gloo)::' |
        cut -c1-200 | head -20 | sed 's/^/    /'
    done
    kill "$srun_pid"
  fi
  wait "$srun_pid"
  rc=$?
  took=$(ms_since "$t0")
  echo "killed: srun exit $rc, $(since "$t0") s after task 2 was killed"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || bad "killed: srun exit $rc" "$tmp/killed.out"
  # A killed peer is seen at once; naming it takes the ranks at most 5 s more.
  [ "$took" -lt 20000 ] || bad "killed: srun took $took ms to end, expected under 20 s" "$tmp/killed.out"
  grep -q "holmes-train: rank [013]: .*, peer rank 2$" "$tmp/killed.out" ||
    bad "killed: no rank names rank 2" "$tmp/killed.out"
  grep -q "srun: error: .*: task 2: Killed" "$tmp/killed.out" || bad "killed: srun does not name task 2" "$tmp/killed.out"
fi
wait "$srun_pid" 2>/dev/null

slurm_down || fail=1
[ -z "$(slurm_pids)" ] || bad "processes of the cluster left: $(slurm_pids | tr '\n' ' ')"
no_leftovers "slurm"
finish
