# A private single-node Slurm for the tests of this folder (sourced; not a test itself):
# munged, slurmctld and slurmd of Debian's slurm-wlm on this host, every file of it (config,
# munge key and socket, spool, state, pid files, logs) under one folder, free ports, and its
# own cluster name, so it cannot meet a system Slurm. Needs root.
#
#   slurm_up DIR CPUS GPUS  starts it (exports SLURM_CONF for the client commands); returns 1
#                           with the reason in $slurm_why when it cannot start
#   slurm_down              cancels every job, stops the daemons and kills whatever is left of
#                           the cluster's processes; bounded in time, safe to call twice
#   slurm_pids              the cluster's processes: daemons, slurmstepd, job scripts, tasks
#   job_field JOB KEY       a field of `scontrol show job` (JobState, Restarts, ExitCode, ...)
#   wait_job JOB SECONDS    waits until the job has ended (COMPLETED, FAILED, ...), prints
#                           the final state; returns 1 when it has not ended in time
slurm_dir=
slurm_why=

slurm_log_tail() {  # the last lines of the daemons' logs, for a reason or a failure
  local f
  for f in "$slurm_dir"/munged.log "$slurm_dir"/slurmctld.log "$slurm_dir"/slurmd.log; do
    [ -f "$f" ] && { echo "--- $f"; tail -8 "$f"; }
  done
}

slurm_pids() {
  # A process belongs to the cluster when its command line names the folder (daemons, batch
  # scripts in the spool, binaries under it) or its environment has our SLURM_CONF (slurmstepd
  # inherits slurmd's; job tasks and client commands get the submitter's).
  [ -n "$slurm_dir" ] || return 0
  python3 - "$slurm_dir" "$$" <<'PY'
import os, sys
folder, conf = sys.argv[1].encode(), f"SLURM_CONF={sys.argv[1]}/slurm.conf".encode()
skip = {os.getpid(), os.getppid(), int(sys.argv[2])}
for pid in filter(str.isdigit, os.listdir("/proc")):
    if int(pid) in skip:
        continue
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read()
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:
        continue
    if folder in cmd or conf in env:
        print(pid)
PY
}

job_field() {
  [ -n "$1" ] || return 0  # no job (sbatch failed): nothing, rather than the first job's field
  timeout 10 scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}

wait_job() {
  local state n=$(( $2 * 4 ))
  [ -n "$1" ] || { echo "not submitted"; return 1; }
  for _ in $(seq "$n"); do
    state=$(job_field "$1" JobState)
    case "$state" in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED)
        echo "$state"
        return 0 ;;
    esac
    sleep 0.25
  done
  echo "${state:-unknown}"
  return 1
}

slurm_up() {
  slurm_dir=$1
  local cpus=$2 gpus=$3 host node i ctld_port slurmd_port
  mkdir -p "$slurm_dir"/{state,spool,dev}
  # munged wants every folder above its socket searchable by all (mktemp -d makes 0700).
  chmod 755 "$slurm_dir" "$(dirname "$slurm_dir")"
  host=$(hostname -s)
  # The node's name is what SLURM_JOB_NODELIST says and what holmes-train connects to.
  node=$host
  getent hosts "$node" >/dev/null || node=localhost
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  # GPUs a scheduler can count: Slurm only wants a file per GPU (it warns that these are no
  # devices); the jobs train on the CPU.
  for i in $(seq 0 $(( gpus - 1 ))); do : >"$slurm_dir/dev/gpu$i"; done
  echo "NodeName=$node Name=gpu File=$slurm_dir/dev/gpu[0-$(( gpus - 1 ))]" >"$slurm_dir/gres.conf"
  cat >"$slurm_dir/slurm.conf" <<EOF
ClusterName=holmes$$
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# A requeued job may start again once its credential has expired: 5 s instead of 120.
AuthInfo=socket=$slurm_dir/munge.socket,cred_expire=5
StateSaveLocation=$slurm_dir/state
SlurmdSpoolDir=$slurm_dir/spool
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd.pid
SlurmctldLogFile=$slurm_dir/slurmctld.log
SlurmdLogFile=$slurm_dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
KillWait=5
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
GresTypes=gpu
NodeName=$node NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus Gres=gpu:$gpus State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
  export SLURM_CONF=$slurm_dir/slurm.conf
  if ! timeout 10 mungekey --create --keyfile="$slurm_dir/munge.key" >"$slurm_dir/setup.log" 2>&1 ||
    ! timeout 10 munged --socket="$slurm_dir/munge.socket" --key-file="$slurm_dir/munge.key" \
      --pid-file="$slurm_dir/munged.pid" --log-file="$slurm_dir/munged.log" \
      --seed-file="$slurm_dir/munged.seed" >>"$slurm_dir/setup.log" 2>&1; then
    slurm_why="munged did not start: $(tail -3 "$slurm_dir/setup.log" | tr '\n' ' ')"
    return 1
  fi
  if ! timeout 20 slurmctld -f "$SLURM_CONF" >>"$slurm_dir/setup.log" 2>&1 ||
    ! timeout 20 slurmd -f "$SLURM_CONF" -N "$node" >>"$slurm_dir/setup.log" 2>&1; then
    slurm_why="slurmctld or slurmd did not start: $(tail -3 "$slurm_dir/setup.log" | tr '\n' ' ')"
    return 1
  fi
  for _ in $(seq 60); do
    [ "$(timeout 5 sinfo -h -N -o %t 2>/dev/null)" = idle ] && return 0
    sleep 0.5
  done
  slurm_why="the node did not become idle in 30 s: $(timeout 5 sinfo -h -N -o '%t %E' 2>&1 | tr '\n' ' ')"
  return 1
}

slurm_down() {
  [ -n "$slurm_dir" ] && [ -d "$slurm_dir" ] || return 0
  local pid f
  if [ -f "$slurm_dir/slurmctld.pid" ]; then
    timeout 10 scancel --quiet --user="$(id -un)" 2>/dev/null
    for _ in $(seq 40); do
      [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.25
    done
  fi
  for f in slurmd slurmctld munged; do
    pid=$(cat "$slurm_dir/$f.pid" 2>/dev/null) && [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
  done
  for _ in $(seq 40); do
    [ -z "$(slurm_pids)" ] && return 0
    sleep 0.25
  done
  for pid in $(slurm_pids); do kill -KILL "$pid" 2>/dev/null; done
  for _ in $(seq 20); do
    [ -z "$(slurm_pids)" ] && return 0
    sleep 0.25
  done
  echo "slurm_down: processes left: $(slurm_pids | tr '\n' ' ')"
  return 1
}
