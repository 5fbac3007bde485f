// The plan's NCCL variables (engine/plan/nccl.hpp) against the process environment: NCCL
// reads NCCL_IB_HCA, NCCL_SOCKET_IFNAME, ... once per process, on its first communicator, so
// they are set once, before that, and never changed between communicators. A value the user
// exported wins over the plan's and is reported; NCCL_NET is refused (it would override the
// network every communicator is created with).
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

// UserError (exit 2) when NCCL_NET is set (non-empty) in `env`, saying why and what to do.
void refuse_nccl_net(const EnvMap& env);

// The variables for the processes of `node`, each with the value NCCL will read given `env`.
// Pure. Calls refuse_nccl_net first. Empty for CPU plans.
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
