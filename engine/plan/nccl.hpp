// What the NCCL groups of a CUDA plan need, as pure functions of the plan (docs/comm.md,
// "NCCL groups"):
// - the variables NCCL reads once per process (on its first communicator), per node: the
//   island's RDMA ports, the RoCE GID index, the Ethernet interface for bootstrap and socket
//   traffic. They are process-wide, so they are the node's, never a group's: what differs
//   between the groups of one process is only the network (`config.netName`).
// - the communicators one rank creates, in plan order, each with its network: "IB" for a
//   group inside an RDMA island (InfiniBand and RoCE alike: NCCL's IB transport drives both),
//   "Socket" for a group that leaves it.
#pragma once

#include <string>
#include <vector>

#include "engine/plan/plan.hpp"

namespace holmes::plan {

struct EnvVar {
  std::string name;   // "NCCL_IB_HCA"
  std::string value;  // "=mlx5_0:1,mlx5_1:1"
  std::string why;    // one clause for --plan-only and the start-up log
};

// The variables to set in every process of `node` (index into plan.hostnames) before its
// first communicator. Empty for CPU plans (no NCCL). In the order NCCL's documentation lists
// them. std::out_of_range when `node` is not a node of the plan.
std::vector<EnvVar> nccl_env(const Plan& plan, int node);

// One NCCL communicator of a rank.
struct NcclComm {
  int group = 0;            // index into plan.groups
  std::string name;         // group_name(): the store prefix of its unique id
  std::string net;          // config.netName: "IB" or "Socket"
  std::vector<int> ranks;   // members (global ranks, group rank order)
};

// "tp0", "dp3", "world0": unique in the plan, the same on every rank.
std::string group_name(const Group& g);

// The network a group's communicator uses on `node` (one of its members' nodes): "IB" for
// nccl-ib and nccl-roce, "Socket" for nccl-socket, and for intra-node groups "IB" when the
// node has RDMA ports (NCCL falls back to its network when GPUs cannot reach each other
// directly), else "Socket". std::invalid_argument for a gloo-tcp group (not NCCL).
std::string nccl_net(const Plan& plan, const Group& g, int node);

// The communicators `rank` creates, in plan order (plan.groups order, which is the same on
// every rank, so no two ranks wait on each other's creation in opposite orders): every
// NCCL-transport group of two or more members that holds `rank`. Empty for CPU plans.
std::vector<NcclComm> nccl_communicators(const Plan& plan, int rank);

}  // namespace holmes::plan
