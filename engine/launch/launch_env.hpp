// Where this process sits in the job: which launcher started it (Slurm, torchrun-style
// environment, our own local launcher, or nobody) and its rank, node and master address.
//
// Precedence when several sets of variables are present (first match wins):
//   1. RANK / WORLD_SIZE (torchrun-style). Explicit rank variables are a statement by
//      whoever started the process; they win over Slurm because a process started by a
//      launcher inside an srun step (torchrun, or `holmes-train --nproc-per-node N` run as
//      one Slurm task per node) inherits the SLURM_* variables of the launcher's task.
//      Combining them with --nproc-per-node is an error (the process is already a worker).
//   2. --nproc-per-node N > 0: this process is the local launcher ("local"); inside an srun
//      step (SLURM_PROCID set) it is the launcher of one node of a multi-node job.
//   3. SLURM_PROCID (srun, one task per device): "slurm".
//   4. nothing: one process, world size 1 ("single").
#pragma once

#include <map>
#include <string>
#include <vector>

namespace holmes::launch {

// Base and span of the master port derived from the Slurm job id (unless MASTER_PORT is
// set): unprivileged and below Linux's default ephemeral range (32768-60999), so that the
// port is not already taken by some outgoing connection.
inline constexpr int kSlurmPortBase = 20000;
inline constexpr int kSlurmPortSpan = 10000;
// Port used when RANK/WORLD_SIZE are set without MASTER_PORT (PyTorch's default).
inline constexpr int kDefaultMasterPort = 29500;

struct LaunchEnv {
  // For "slurm", "torchrun" and "single": this process's own place in the job.
  // For "local" (this process is the launcher, it runs no model itself): rank is the
  // global rank of its first worker (node_rank * local_world_size), local_rank is 0, and
  // local_world_size is the number of workers it spawns.
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int num_nodes = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;             // 0 = "any free port" (single process, or local launcher alone)
  std::vector<std::string> hosts;  // the job's node names (Slurm); empty when unknown
  std::string source = "single";   // "slurm" | "torchrun" | "local" | "single"
  // Per-job token for the rendezvous: HOLMES_JOB_TOKEN when set; under Slurm derived from
  // the job and step ids (identical on all nodes, different for every step); "" when the
  // caller must make one (the local launcher draws a random one).
  std::string job_token;
  // HOLMES_NODE_NAME: the host name this node reports at start-up instead of the machine's
  // (a node known by another name in a topology file; one machine playing several nodes in
  // tests). "" = the machine's own.
  std::string node_name;
  // HOLMES_STORE_HOSTED=1: the TCP store at MASTER_ADDR:MASTER_PORT is already served by
  // another process (the local launcher of an elastic job, which outlives its workers), so
  // rank 0 connects to it like every other rank instead of hosting it.
  bool store_hosted = false;
  // The Slurm job this process runs in, for the start-up log: "Slurm job 4711 step 0" (and
  // ", restart N" after a requeue); "" outside Slurm. Set in every mode, since the workers of
  // a launcher inside an srun task inherit the task's SLURM_* variables.
  std::string slurm_job;
};

// Pure: reads only `env`. `nproc_per_node_flag` is --nproc-per-node (0 = not given);
// `job_name` (the spec's job name) is mixed into the derived Slurm port and token so that two
// different jobs in one allocation do not meet. Throws holmes::UserError naming the variable,
// the value seen and what is accepted when the variables are partial or inconsistent.
LaunchEnv detect_launch_env(const std::map<std::string, std::string>& env, int nproc_per_node_flag,
                            const std::string& job_name);

// The process environment as a map (reads `environ`).
std::map<std::string, std::string> process_environment();

// detect_launch_env(process_environment(), ...).
LaunchEnv detect_launch_env_from_process(int nproc_per_node_flag, const std::string& job_name);

// One line for logs: "slurm rank 3/8 (node 1/2, local 1/4) master node01:23456, Slurm job 4711 step 0".
std::string describe(const LaunchEnv& env);

// Slurm's per-node task counts, "4(x2),3,1" -> {4, 4, 3, 1}. Throws UserError naming
// `variable` when the text is not of that form.
std::vector<int> parse_slurm_tasks_per_node(const std::string& text, const std::string& variable);

// The master port a Slurm job uses when MASTER_PORT is not set: deterministic in the job id,
// step id and job name, in [kSlurmPortBase, kSlurmPortBase + kSlurmPortSpan).
int derive_slurm_port(long long job_id, long long step_id, const std::string& job_name);

}  // namespace holmes::launch
