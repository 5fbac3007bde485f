// Slurm variables -> LaunchEnv. srun sets per-step variables (SLURM_STEP_*) beside the
// per-job ones; a step may use fewer nodes or tasks than the allocation, so the step's
// values are preferred and the job's are the fallback (sbatch scripts, older Slurm).
#include "common/hash.hpp"
#include "engine/launch/slurm_env.hpp"

#include <fmt/format.h>

#include <numeric>

#include "common/errors.hpp"
#include "engine/topo/hostlist.hpp"

namespace holmes::launch {

namespace {

constexpr long long kMaxCount = 1 << 20;

// What Slurm says about the step, before deciding what this process is.
struct SlurmStep {
  int ntasks = 1;
  int nnodes = 1;
  int node_id = 0;
  std::vector<int> tasks_per_node;  // [nnodes]
  std::string tasks_source;         // the variable tasks_per_node came from, for messages
  std::vector<std::string> hosts;
  std::string master_addr;
  int master_port = 0;
  std::string token;
};

std::vector<int> tasks_per_node_of(const detail::EnvMap& env, SlurmStep& s) {
  if (auto var = detail::first_of(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})) {
    s.tasks_source = fmt::format("{}={}", var->first, var->second);
    return parse_slurm_tasks_per_node(var->second, var->first);
  }
  if (auto per = detail::get_int(env, "SLURM_NTASKS_PER_NODE", 1, kMaxCount, "a positive integer")) {
    s.tasks_source = fmt::format("SLURM_NTASKS_PER_NODE={}", *per);
    return std::vector<int>(s.nnodes, static_cast<int>(*per));
  }
  if (s.ntasks % s.nnodes != 0)
    throw UserError(fmt::format(
        "Slurm: {} tasks on {} nodes and neither SLURM_TASKS_PER_NODE nor SLURM_NTASKS_PER_NODE is set; "
        "accepted: run under srun (it sets SLURM_STEP_TASKS_PER_NODE)",
        s.ntasks, s.nnodes));
  s.tasks_source = fmt::format("{} tasks over {} nodes", s.ntasks, s.nnodes);
  return std::vector<int>(s.nnodes, s.ntasks / s.nnodes);
}

void read_master(const detail::EnvMap& env, const std::string& job_name, SlurmStep& s) {
  auto addr = detail::get(env, "MASTER_ADDR");
  if (addr)
    s.master_addr = *addr;
  else if (!s.hosts.empty())
    s.master_addr = s.hosts.front();
  else if (s.nnodes == 1)
    s.master_addr = "127.0.0.1";
  else
    throw UserError(fmt::format(
        "Slurm: SLURM_STEP_NODELIST and SLURM_JOB_NODELIST are not set and the step has {} nodes, so the "
        "master (first host) is unknown; accepted: run under srun, or set MASTER_ADDR",
        s.nnodes));
  auto step_id = detail::first_of(env, {"SLURM_STEP_ID", "SLURM_STEPID"});
  long long step = step_id ? detail::parse_int(step_id->first, step_id->second, 0, 1LL << 62, "a non-negative integer") : 0;
  auto job_id = detail::first_of(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
  long long job = job_id ? detail::parse_int(job_id->first, job_id->second, 0, 1LL << 62, "a non-negative integer") : -1;
  if (auto port = detail::get_int(env, "MASTER_PORT", 1, 65535, "a TCP port number 1..65535")) {
    s.master_port = static_cast<int>(*port);
  } else if (job >= 0) {
    s.master_port = derive_slurm_port(job, step, job_name);
  } else {
    throw UserError(
        "Slurm: SLURM_JOB_ID is not set, so no master port can be derived from it; accepted: run under srun, "
        "or set MASTER_PORT");
  }
  s.token = detail::get(env, "HOLMES_JOB_TOKEN")
                .value_or(fmt::format("slurm-{:016x}", fnv1a(fmt::format("{}.{}/{}", job, step, job_name))));
}

SlurmStep read_step(const detail::EnvMap& env, const std::string& job_name) {
  SlurmStep s;
  auto ntasks = detail::first_of(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"});
  if (!ntasks)
    throw UserError(fmt::format(
        "Slurm: SLURM_PROCID={} is set but SLURM_NTASKS is not; accepted: start holmes-train with srun "
        "(one task per device, or --nproc-per-node with one task per node)",
        detail::get(env, "SLURM_PROCID").value_or("")));
  s.ntasks = static_cast<int>(detail::parse_int(ntasks->first, ntasks->second, 1, kMaxCount,
                                                fmt::format("an integer 1..{}", kMaxCount)));
  // A batch script sees SLURM_PROCID=0 and the job's SLURM_NTASKS but no step id: without
  // this check it would take itself for rank 0 and wait cluster.timeout_s for the others.
  if (s.ntasks > 1 && !detail::first_of(env, {"SLURM_STEP_ID", "SLURM_STEPID"}))
    throw UserError(fmt::format(
        "Slurm: {}={} and SLURM_PROCID={} are set but SLURM_STEP_ID is not: this is the batch script of "
        "job {}, not one of the tasks srun starts, and no other rank would come; accepted: start holmes-train "
        "with srun (srun holmes-train ..., see scripts/slurm/)",
        ntasks->first, ntasks->second, detail::get(env, "SLURM_PROCID").value_or(""),
        detail::get(env, "SLURM_JOB_ID").value_or("?")));
  if (auto list = detail::first_of(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}))
    s.hosts = topo::expand_hostlist(list->second);
  auto nnodes = detail::first_of(env, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"});
  if (nnodes)
    s.nnodes = static_cast<int>(detail::parse_int(nnodes->first, nnodes->second, 1, s.ntasks,
                                                  fmt::format("1 <= {} <= number of tasks {}", nnodes->first, s.ntasks)));
  else if (!s.hosts.empty())
    s.nnodes = static_cast<int>(s.hosts.size());
  if (!s.hosts.empty() && s.hosts.size() < static_cast<size_t>(s.nnodes))
    throw UserError(fmt::format("Slurm: the node list has {} hosts ({}...) but the step has {} nodes; accepted: "
                                "a node list with at least as many hosts as nodes",
                                s.hosts.size(), s.hosts.front(), s.nnodes));
  s.node_id = static_cast<int>(
      detail::get_int(env, "SLURM_NODEID", 0, s.nnodes - 1, fmt::format("0 <= SLURM_NODEID < {} nodes", s.nnodes))
          .value_or(0));
  s.tasks_per_node = tasks_per_node_of(env, s);
  int sum = std::accumulate(s.tasks_per_node.begin(), s.tasks_per_node.end(), 0);
  if (s.tasks_per_node.size() != static_cast<size_t>(s.nnodes) || sum != s.ntasks)
    throw UserError(fmt::format("Slurm: {} lists {} tasks on {} nodes, but the step has {} tasks on {} nodes; "
                                "accepted: per-node counts that add up to the step's tasks",
                                s.tasks_source, sum, s.tasks_per_node.size(), s.ntasks, s.nnodes));
  read_master(env, job_name, s);
  return s;
}

void copy_common(const SlurmStep& s, LaunchEnv& out) {
  out.node_rank = s.node_id;
  out.num_nodes = s.nnodes;
  out.hosts = s.hosts;
  out.master_addr = s.master_addr;
  out.master_port = s.master_port;
  out.job_token = s.token;
}

}  // namespace

std::vector<int> parse_slurm_tasks_per_node(const std::string& text, const std::string& variable) {
  auto bad = [&](const std::string& why) {
    return UserError(fmt::format("environment variable {}='{}' {}; accepted: comma-separated counts with "
                                 "optional repeats, like '4(x2),3'",
                                 variable, text, why));
  };
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    long long repeat = 1;
    size_t paren = item.find('(');
    std::string count = item.substr(0, paren);
    if (paren != std::string::npos) {
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')')
        throw bad(fmt::format("has a malformed repeat '{}'", item));
      std::string times = item.substr(paren + 2, item.size() - paren - 3);
      repeat = detail::parse_int(variable, times, 1, kMaxCount, "a repeat count like '(x2)'");
    }
    if (count.empty()) throw bad("has an empty entry");
    long long tasks = detail::parse_int(variable, count, 1, kMaxCount, "counts like '4(x2),3'");
    if (static_cast<long long>(out.size()) + repeat > kMaxCount) throw bad("lists too many nodes");
    out.insert(out.end(), static_cast<size_t>(repeat), static_cast<int>(tasks));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

int derive_slurm_port(long long job_id, long long step_id, const std::string& job_name) {
  auto h = fnv1a(fmt::format("{}.{}/{}", job_id, step_id, job_name));
  return kSlurmPortBase + static_cast<int>(h % kSlurmPortSpan);
}

namespace detail {

LaunchEnv detect_slurm_task(const EnvMap& env, const std::string& job_name) {
  SlurmStep s = read_step(env, job_name);
  LaunchEnv out;
  out.source = "slurm";
  out.world_size = s.ntasks;
  out.rank = static_cast<int>(parse_int("SLURM_PROCID", *get(env, "SLURM_PROCID"), 0, s.ntasks - 1,
                                        fmt::format("0 <= SLURM_PROCID < number of tasks {}", s.ntasks)));
  out.local_world_size = s.tasks_per_node[s.node_id];
  out.local_rank = static_cast<int>(
      get_int(env, "SLURM_LOCALID", 0, out.local_world_size - 1,
              fmt::format("0 <= SLURM_LOCALID < {} tasks on node {} ({})", out.local_world_size, s.node_id,
                          s.tasks_source))
          .value_or(0));
  copy_common(s, out);
  return out;
}

LaunchEnv detect_slurm_node_launcher(const EnvMap& env, int nproc, const std::string& job_name) {
  SlurmStep s = read_step(env, job_name);
  for (size_t node = 0; node < s.tasks_per_node.size(); ++node)
    if (s.tasks_per_node[node] != 1)
      throw UsageError(fmt::format(
          "--nproc-per-node {} inside an srun step needs exactly one task per node, but {} puts {} tasks on "
          "node {}; accepted: srun --ntasks-per-node=1 holmes-train --nproc-per-node {} ..., or srun with one "
          "task per device and no --nproc-per-node",
          nproc, s.tasks_source, s.tasks_per_node[node], node, nproc));
  LaunchEnv out;
  out.source = "local";
  out.local_world_size = nproc;
  out.world_size = nproc * s.nnodes;
  out.rank = s.node_id * nproc;
  copy_common(s, out);
  return out;
}

}  // namespace detail

}  // namespace holmes::launch
