#include "engine/parallel/device_groups.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <span>
#include <vector>

#include "common/errors.hpp"
#include "engine/launch/launch_env.hpp"
#include "engine/plan/nccl.hpp"
#include "backends/backends.hpp"

namespace holmes::parallel {

namespace {

// "0", "1" or unset/empty (-1) for a switch variable; UserError for anything else.
int switch_value(const runtime::EnvMap& env, const std::string& name, const char* meaning) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return -1;
  if (it->second == "0") return 0;
  if (it->second == "1") return 1;
  throw UserError(fmt::format("environment variable {}='{}' is not a switch; accepted: 0 or unset, 1 ({})", name,
                              it->second, meaning));
}

std::unique_ptr<comm::ProcessGroup>* slot(DeviceGroups& d, plan::GroupKind kind) {
  switch (kind) {
    case plan::GroupKind::kTp: return &d.tp;
    case plan::GroupKind::kPp: return &d.pp;
    case plan::GroupKind::kDp: return &d.dp;
    case plan::GroupKind::kEmbedding: return &d.embedding;
    case plan::GroupKind::kWorld: return nullptr;  // host values only: Gloo
  }
  return nullptr;
}

}  // namespace

NcclChoice choose_nccl(const runtime::EnvMap& env, bool cuda, const std::string& nccl_why, int local_world, int gpus) {
  NcclChoice c;
  const int want = switch_value(env, "HOLMES_NCCL", "1: device buffers through NCCL groups; 0: staged through Gloo");
  const int shared = switch_value(env, "HOLMES_NCCL_SHARED_GPU",
                                  "1: ranks that share a GPU still use NCCL, each with its own NCCL_HOSTID");
  c.required = want == 1;
  if (!cuda) return c;  // nothing to say: CPU jobs have no NCCL groups
  auto no = [&](std::string why) {
    if (c.required)
      throw UserError(fmt::format("HOLMES_NCCL=1, but NCCL cannot be used here: {} (accepted: HOLMES_NCCL=0 or unset "
                                  "to stage device buffers through Gloo instead)",
                                  why));
    c.why = std::move(why);
    return c;
  };
  if (want == 0) {
    c.why = "HOLMES_NCCL=0";
    return c;
  }
  if (want == -1) {
    // Opt-in until this path has passed scripts/gpu_check.sh on a GPU (docs/comm.md).
    c.why = "NCCL groups for device buffers are opt-in (HOLMES_NCCL=1) until checked on a GPU";
    c.by_default = true;
    return c;
  }
  if (!nccl_why.empty()) return no(nccl_why);
  if (gpus > 0 && local_world > gpus) {
    if (shared != 1)
      return no(fmt::format("{} processes share {} GPU(s) on this node and NCCL refuses two ranks of one "
                            "communicator on one GPU (HOLMES_NCCL_SHARED_GPU=1 gives each process its own "
                            "NCCL_HOSTID, a test set-up)",
                            local_world, gpus));
    c.shared_gpu = true;
  }
  c.use = true;
  return c;
}

DeviceGroups make_device_groups(runtime::Runtime& rt, const spec::JobSpec& spec) {
  DeviceGroups d;
  const runtime::EnvMap env = launch::process_environment();
  const bool cuda = spec.job.device == spec::Device::kCuda;
  std::string nccl_why;
  if (cuda && !backends::nccl_usable(&nccl_why) && nccl_why.empty()) nccl_why = "libnccl cannot be loaded";
  const NcclChoice mine = choose_nccl(env, cuda, nccl_why, rt.local_world, cuda ? backends::local_gpus().count : 0);
  if (!cuda) return d;
  // Every rank must agree: a group half NCCL, half Gloo would never connect.
  std::vector<float> refusals{mine.use ? 0.0f : 1.0f};
  rt.world_group->all_reduce(std::span<float>(refusals), comm::ReduceOp::kMax);
  if (!mine.use && !(mine.by_default && rt.rank != 0))
    d.log.push_back(fmt::format("nccl: not used{}: {}", mine.by_default ? "" : " by this rank", mine.why));
  if (refusals[0] > 0.0f) {
    if (mine.required)
      throw UserError("HOLMES_NCCL=1, but another rank cannot use NCCL (its log says why)");
    if (rt.rank == 0 || !mine.use)
      d.log.push_back("nccl: device buffers staged through host memory into the Gloo groups");
    return d;
  }
  for (const std::string& line : runtime::describe_nccl_env(runtime::apply_nccl_env(rt.plan, rt.node))) d.log.push_back(line);
  if (mine.shared_gpu && env.count("NCCL_HOSTID") == 0) {
    // Read by NCCL once, at its first communicator: each process becomes a host of its own.
    const std::string id = fmt::format("holmes-{}-rank{}", rt.plan.hostnames.at(rt.node), rt.rank);
    ::setenv("NCCL_HOSTID", id.c_str(), 1);
    d.log.push_back(fmt::format("nccl: NCCL_HOSTID={} (HOLMES_NCCL_SHARED_GPU=1: ranks share a GPU)", id));
  }
  const plan::RankInfo& me = rt.plan.ranks.at(rt.rank);
  for (const plan::NcclComm& c : plan::nccl_communicators(rt.plan, rt.rank)) {
    const plan::Group& g = rt.plan.groups.at(c.group);
    auto* target = slot(d, g.kind);
    if (target == nullptr) continue;
    comm::GroupSpec gs;
    gs.name = "nccl/" + c.name;
    gs.global_ranks = c.ranks;
    gs.global_rank = rt.rank;
    gs.timeout = runtime::timeout_of(spec);
    auto group = backends::make_nccl_group(rt.store, gs, c.net);
    const int want = runtime::expected_group_rank(g, me);
    if (group->rank() != want)
      throw std::logic_error(fmt::format("group {}: rank {} has NCCL group rank {} but its {} coordinate is {}",
                                         gs.name, rt.rank, group->rank(), plan::to_string(g.kind), want));
    d.log.push_back(fmt::format("nccl: {} over {} ({} members)", c.name, group->transport(), c.ranks.size()));
    *target = std::move(group);
  }
  return d;
}

}  // namespace holmes::parallel
