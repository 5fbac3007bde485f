#include "common/hash.hpp"
#include "engine/launch/launch_env.hpp"

#include <fmt/format.h>

#include "engine/launch/env_read.hpp"
#include "engine/launch/slurm_env.hpp"
#include "common/errors.hpp"

extern char** environ;

namespace holmes::launch {

using detail::EnvMap;
using detail::get;
using detail::get_int;

namespace {

constexpr long long kMaxWorld = 1 << 20;

std::string hex_token(const std::string& prefix, const std::string& seed) {
  return fmt::format("{}-{:016x}", prefix, fnv1a(seed));
}

int master_port_or(const EnvMap& env, int fallback) {
  auto port = get_int(env, "MASTER_PORT", 1, 65535, "a TCP port number 1..65535");
  return port ? static_cast<int>(*port) : fallback;
}

// World, node and local ranks from RANK / WORLD_SIZE and the optional LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK (or NODE_RANK), GROUP_WORLD_SIZE.
LaunchEnv detect_torchrun(const EnvMap& env, const std::string& job_name) {
  auto rank_text = get(env, "RANK");
  auto world_text = get(env, "WORLD_SIZE");
  if (!rank_text || !world_text)
    throw UserError(fmt::format(
        "environment variable {} is set ('{}') but {} is not; accepted: both RANK and WORLD_SIZE "
        "(torchrun-style launch) or neither",
        rank_text ? "RANK" : "WORLD_SIZE", rank_text ? *rank_text : *world_text, rank_text ? "WORLD_SIZE" : "RANK"));
  LaunchEnv out;
  out.source = "torchrun";
  out.world_size = static_cast<int>(
      detail::parse_int("WORLD_SIZE", *world_text, 1, kMaxWorld, fmt::format("an integer 1..{}", kMaxWorld)));
  const int world = out.world_size;
  out.rank = static_cast<int>(
      detail::parse_int("RANK", *rank_text, 0, world - 1, fmt::format("0 <= RANK < WORLD_SIZE={}", world)));

  auto groups = get_int(env, "GROUP_WORLD_SIZE", 1, world, fmt::format("1 <= GROUP_WORLD_SIZE <= WORLD_SIZE={}", world));
  int default_local = (groups && world % *groups == 0) ? world / static_cast<int>(*groups) : world;
  out.local_world_size = static_cast<int>(
      get_int(env, "LOCAL_WORLD_SIZE", 1, world, fmt::format("1 <= LOCAL_WORLD_SIZE <= WORLD_SIZE={}", world))
          .value_or(default_local));
  const int local_world = out.local_world_size;
  out.local_rank = static_cast<int>(
      get_int(env, "LOCAL_RANK", 0, local_world - 1,
              fmt::format("0 <= LOCAL_RANK < LOCAL_WORLD_SIZE={}", local_world))
          .value_or(out.rank % local_world));

  if (groups) {
    out.num_nodes = static_cast<int>(*groups);
  } else if (world % local_world == 0) {
    out.num_nodes = world / local_world;
  } else {
    throw UserError(fmt::format(
        "environment variables WORLD_SIZE={} and LOCAL_WORLD_SIZE={} do not give a whole number of nodes; "
        "accepted: WORLD_SIZE a multiple of LOCAL_WORLD_SIZE, or GROUP_WORLD_SIZE set to the number of nodes",
        world, local_world));
  }
  const int nodes = out.num_nodes;
  auto node_var = detail::first_of(env, {"GROUP_RANK", "NODE_RANK"});
  out.node_rank = node_var ? static_cast<int>(detail::parse_int(
                                 node_var->first, node_var->second, 0, nodes - 1,
                                 fmt::format("0 <= {} < number of nodes {}", node_var->first, nodes)))
                           : out.rank / local_world;

  auto addr = get(env, "MASTER_ADDR");
  if (!addr && nodes > 1)
    throw UserError(fmt::format(
        "environment variable MASTER_ADDR is not set but RANK/WORLD_SIZE describe {} nodes; accepted: "
        "MASTER_ADDR=<host name or address of rank 0> (MASTER_PORT optional, default {})",
        nodes, kDefaultMasterPort));
  out.master_addr = addr.value_or("127.0.0.1");
  out.master_port = master_port_or(env, kDefaultMasterPort);
  auto run_id = get(env, "TORCHELASTIC_RUN_ID").value_or("");
  out.job_token = get(env, "HOLMES_JOB_TOKEN")
                      .value_or(hex_token("env", fmt::format("{}/{}:{}/{}", run_id, out.master_addr,
                                                            out.master_port, job_name)));
  return out;
}

// --nproc-per-node N outside Slurm: this process spawns N workers on this machine.
LaunchEnv detect_local_alone(const EnvMap& env, int nproc) {
  LaunchEnv out;
  out.source = "local";
  out.world_size = nproc;
  out.local_world_size = nproc;
  out.master_port = master_port_or(env, 0);
  out.master_addr = get(env, "MASTER_ADDR").value_or("127.0.0.1");
  out.job_token = get(env, "HOLMES_JOB_TOKEN").value_or("");
  return out;
}

}  // namespace

namespace {

LaunchEnv detect_place(const EnvMap& env, int nproc_per_node_flag, const std::string& job_name) {
  if (nproc_per_node_flag < 0 || nproc_per_node_flag > kMaxWorld)
    throw UsageError(fmt::format("--nproc-per-node {} is out of range; accepted: 1..{}", nproc_per_node_flag,
                                 kMaxWorld));
  bool has_rank_vars = get(env, "RANK") || get(env, "WORLD_SIZE");
  if (has_rank_vars && nproc_per_node_flag > 0)
    throw UsageError(fmt::format(
        "--nproc-per-node {} was given, but RANK='{}' / WORLD_SIZE='{}' are set: this process is already a worker "
        "of a launcher (torchrun or holmes-train); accepted: drop --nproc-per-node, or unset RANK and WORLD_SIZE",
        nproc_per_node_flag, get(env, "RANK").value_or(""), get(env, "WORLD_SIZE").value_or("")));
  if (has_rank_vars) return detect_torchrun(env, job_name);
  bool in_slurm = get(env, "SLURM_PROCID").has_value();
  if (nproc_per_node_flag > 0)
    return in_slurm ? detail::detect_slurm_node_launcher(env, nproc_per_node_flag, job_name)
                    : detect_local_alone(env, nproc_per_node_flag);
  if (in_slurm) return detail::detect_slurm_task(env, job_name);
  LaunchEnv single;
  single.master_port = master_port_or(env, 0);
  single.job_token = get(env, "HOLMES_JOB_TOKEN").value_or("");
  return single;
}

// Slurm's own words for the job, taken as they are (only logged): "Slurm job 4711 step 0, restart 1".
std::string slurm_job_text(const EnvMap& env) {
  auto job = detail::first_of(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
  if (!job) return "";
  std::string text = "Slurm job " + job->second;
  if (auto step = detail::first_of(env, {"SLURM_STEP_ID", "SLURM_STEPID"})) text += " step " + step->second;
  if (auto restarts = get(env, "SLURM_RESTART_COUNT"); restarts && *restarts != "0") text += ", restart " + *restarts;
  return text;
}

}  // namespace

LaunchEnv detect_launch_env(const EnvMap& env, int nproc_per_node_flag, const std::string& job_name) {
  LaunchEnv e = detect_place(env, nproc_per_node_flag, job_name);
  e.node_name = get(env, "HOLMES_NODE_NAME").value_or("");
  e.store_hosted = get(env, "HOLMES_STORE_HOSTED").value_or("") == "1";
  e.slurm_job = slurm_job_text(env);
  return e;
}

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> out;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string text(*entry);
    size_t eq = text.find('=');
    if (eq == std::string::npos) continue;
    out.emplace(text.substr(0, eq), text.substr(eq + 1));
  }
  return out;
}

LaunchEnv detect_launch_env_from_process(int nproc_per_node_flag, const std::string& job_name) {
  return detect_launch_env(process_environment(), nproc_per_node_flag, job_name);
}

std::string describe(const LaunchEnv& e) {
  std::string port = e.master_port > 0 ? std::to_string(e.master_port) : "(free port)";
  std::string job = e.slurm_job.empty() ? "" : ", " + e.slurm_job;
  if (e.source == "local")
    return fmt::format("local launcher of ranks {}..{} of {} (node {}/{}) master {}:{}{}", e.rank,
                       e.rank + e.local_world_size - 1, e.world_size, e.node_rank, e.num_nodes, e.master_addr, port,
                       job);
  return fmt::format("{} rank {}/{} (node {}/{}, local {}/{}) master {}:{}{}", e.source, e.rank, e.world_size,
                     e.node_rank, e.num_nodes, e.local_rank, e.local_world_size, e.master_addr, port, job);
}

}  // namespace holmes::launch
