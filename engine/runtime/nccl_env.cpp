#include "engine/runtime/nccl_env.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "common/errors.hpp"
#include "engine/launch/launch_env.hpp"
#include "engine/plan/nccl.hpp"

namespace holmes::runtime {

namespace {

std::optional<std::string> value_of(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

}  // namespace

void refuse_nccl_overrides(const EnvMap& env) {
  if (auto net = value_of(env, "NCCL_NET"))
    throw UserError(fmt::format(
        "environment variable NCCL_NET='{}' is set: NCCL then uses that one network for every communicator and "
        "ignores the per-group config.netName, but the plan needs 'IB' for groups inside an RDMA island and 'Socket' "
        "for groups that cross islands (see --plan-only); unset NCCL_NET (accepted: not set, or empty)",
        *net));
  if (auto blocking = value_of(env, "NCCL_COMM_BLOCKING"); blocking && *blocking != "0")
    throw UserError(fmt::format(
        "environment variable NCCL_COMM_BLOCKING='{}' is set: NCCL's calls would then block, and a rank whose peer "
        "died could not be stopped by the group's time-out (holmes-train creates non-blocking communicators and "
        "aborts them); unset it (accepted: not set, empty or 0)",
        *blocking));
  if (auto it = env.find("NCCL_HOSTID"); it != env.end() && it->second.empty())
    throw UserError("environment variable NCCL_HOSTID is exported but empty: NCCL counts it as set, every process "
                    "hashes the same empty host id and reports a duplicate GPU; give it a value per host or unset it");
  for (const char* old : {"HOLMES_NCCL", "HOLMES_NCCL_SHARED_GPU"})
    if (auto v = value_of(env, old))
      throw UserError(fmt::format("environment variable {}='{}' is no longer read: whether device buffers go over "
                                  "NCCL is the job spec's parallel.nccl (accepted: off, auto, on; on also lets ranks "
                                  "share a GPU); unset {}",
                                  old, *v, old));
}

std::vector<NcclVar> resolve_nccl_env(const plan::Plan& plan, int node, const EnvMap& env) {
  refuse_nccl_overrides(env);
  std::vector<NcclVar> out;
  for (const plan::EnvVar& v : plan::nccl_env(plan, node)) {
    NcclVar r{v.name, v.value, v.value, false, v.why};
    if (auto mine = value_of(env, v.name)) {
      r.value = *mine;
      r.user = true;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> describe_nccl_env(const std::vector<NcclVar>& vars) {
  std::vector<std::string> out;
  for (const NcclVar& v : vars) {
    if (!v.user) out.push_back(fmt::format("nccl env: {}={} ({})", v.name, v.value, v.why));
    else if (v.value == v.planned) out.push_back(fmt::format("nccl env: {}={} (set by the user, as planned)", v.name, v.value));
    else
      out.push_back(fmt::format("nccl env: {}={} set by the user wins over the plan's {} ({})", v.name, v.value,
                                v.planned, v.why));
  }
  return out;
}

std::vector<NcclVar> apply_nccl_env(const plan::Plan& plan, int node) {
  static std::mutex mu;
  static std::optional<std::vector<NcclVar>> applied;
  std::lock_guard<std::mutex> lock(mu);
  std::vector<NcclVar> vars = resolve_nccl_env(plan, node, launch::process_environment());
  if (applied) {
    // What we set on the first call reads as the user's now: compare the values NCCL sees.
    bool same = applied->size() == vars.size();
    for (size_t i = 0; same && i < vars.size(); ++i)
      same = (*applied)[i].name == vars[i].name && (*applied)[i].value == vars[i].value;
    if (!same)
      throw std::logic_error(fmt::format("apply_nccl_env: NCCL's process-wide variables were already set for another "
                                         "plan or node; NCCL reads them once per process (node {})", node));
    return *applied;
  }
  for (const NcclVar& v : vars)
    if (!v.user) setenv(v.name.c_str(), v.value.c_str(), 1);
  applied = vars;
  return vars;
}

}  // namespace holmes::runtime
