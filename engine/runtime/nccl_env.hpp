// The plan's NCCL variables (engine/plan/nccl.hpp) against the process environment: NCCL
// reads NCCL_IB_HCA, NCCL_SOCKET_IFNAME, ... once per process, on its first communicator, so
// they are set once, before that, and never changed between communicators. A value the user
// exported wins over the plan's and is reported; variables that would break what the groups
// rely on are refused (refuse_nccl_overrides).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/plan/plan.hpp"

namespace holmes::runtime {

using EnvMap = std::map<std::string, std::string>;

struct NcclVar {
  std::string name;
  std::string planned;  // the plan's value
  std::string value;    // what NCCL will read: the user's when `user`, else `planned`
  bool user = false;    // set (non-empty) in the environment before we looked
  std::string why;      // the plan's reason for it
};

// UserError (exit 2), saying why and what to do, when `env` has
// - NCCL_NET (non-empty): it overrides the per-group network (config.netName);
// - NCCL_COMM_BLOCKING other than 0: it overrides config.blocking = 0, so a call would block
//   while the group's lock is held and the watchdog could never abort a member that is gone;
// - NCCL_HOSTID exported but empty: NCCL counts it as set and every process hashes "", which
//   it then reports as a duplicate GPU;
// - HOLMES_NCCL or HOLMES_NCCL_SHARED_GPU: replaced by the job spec's parallel.nccl.
void refuse_nccl_overrides(const EnvMap& env);

// The variables for the processes of `node`, each with the value NCCL will read given `env`.
// Pure. Calls refuse_nccl_overrides first. Empty for plans without NCCL groups.
std::vector<NcclVar> resolve_nccl_env(const plan::Plan& plan, int node, const EnvMap& env);

// Log lines: "nccl env: NCCL_IB_HCA==mlx5_0:1 (the ib ports of this node's island)" or
// "nccl env: NCCL_SOCKET_IFNAME=eth1 set by the user wins over the plan's =eth0".
std::vector<std::string> describe_nccl_env(const std::vector<NcclVar>& vars);

// resolve_nccl_env against this process's environment, then setenv for every variable the
// user did not set. Once per process: a later call with the same result does nothing, one
// with another result (another plan for this process) throws std::logic_error, since NCCL
// would not see the change. Returns the resolution.
std::vector<NcclVar> apply_nccl_env(const plan::Plan& plan, int node);

}  // namespace holmes::runtime
