// What the NCCL groups of a CUDA plan need, as pure functions of the plan (docs/comm.md,
// "NCCL groups"):
// - the variables NCCL reads once per process (on its first communicator), per node: the
//   island's RDMA ports, the RoCE GID index, the Ethernet interface for bootstrap and socket
//   traffic. They are process-wide, so they are the node's, never a group's: what differs
//   between the groups of one process is only the network (`config.netName`).
// - the communicators one rank creates, in plan order, each with its network: "IB" for a
//   group inside an RDMA island (InfiniBand and RoCE alike: NCCL's IB transport drives both),
//   "Socket" for a group that leaves it, none for a group inside one node.
#pragma once

#include <string>
#include <vector>

#include "engine/plan/plan.hpp"

namespace holmes::plan {

// Whether a CUDA plan's device buffers go over NCCL groups (spec parallel.nccl, docs/comm.md):
// off: never; auto: when every node can load libnccl and every rank has a GPU of its own;
// on: always (a node without libnccl is a UserError naming it; ranks that share a GPU then
// each get an NCCL_HOSTID, a test set-up NCCL's guide does not support). `why` says what keeps
// a CUDA plan on Gloo (empty when NCCL is used or the plan is not CUDA).
struct NcclDecision {
  bool use = false;
  bool shared_gpu = false;  // use, and some node runs more than one rank per GPU
  std::string why;
};
NcclDecision decide_nccl(const spec::JobSpec& spec, const topo::ClusterTopology& topology, bool cuda);

// True when some group of the plan runs on NCCL (every rank then sets nccl_env once).
bool uses_nccl(const Plan& plan);

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
  std::string net;          // config.netName: "IB", "Socket", or "" (not set: a node-local group)
  std::vector<int> ranks;   // members (global ranks, group rank order)
};

// "tp0", "dp3", "world0": unique in the plan, the same on every rank.
std::string group_name(const Group& g);

// The network a group's communicator uses on `node` (one of its members' nodes): "IB" for
// nccl-ib and nccl-roce, "Socket" for nccl-socket, "" for intra-node groups (config.netName
// unset: with it set NCCL loads only that plugin, and a container without /dev/infiniband
// could not create a communicator that NVLink or P2P carries entirely).
// std::invalid_argument for a gloo-tcp group (not NCCL).
std::string nccl_net(const Plan& plan, const Group& g, int node);

// The communicators `rank` creates, in plan order (plan.groups order, which is the same on
// every rank, so no two ranks wait on each other's creation in opposite orders): every
// NCCL-transport group of two or more members that holds `rank`. Empty for CPU plans.
std::vector<NcclComm> nccl_communicators(const Plan& plan, int rank);

}  // namespace holmes::plan
