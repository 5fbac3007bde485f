// NCCL groups for a CUDA job of several processes (docs/comm.md, "Training on NCCL groups"):
// one communicator per plan group of this rank whose transport is NCCL (nccl-ib, nccl-roce,
// nccl-socket, intra-node), created in plan order after the backend has chosen this rank's
// GPU, with config.netName from the plan ("IB" inside an RDMA island, "Socket" across) and the
// node's NCCL variables set once before the first. The trainer sends device buffers through
// them (StagedGroup with a device group) and keeps the Gloo groups for host buffers (the loss
// and norm sums). The world group stays Gloo only: it carries host values alone.
//
// Whether NCCL is used is decided by every rank and agreed over the world group: NCCL needs a
// CUDA job, libnccl, and one GPU per rank (NCCL refuses two ranks of one communicator on one
// GPU); if any rank lacks one of them, every rank stages device buffers through Gloo, and each
// rank that said no prints why. For now NCCL is opt-in: HOLMES_NCCL=1 turns it on (and makes
// a missing piece an error, exit 2); unset or HOLMES_NCCL=0 stages device buffers through Gloo,
// the path that has passed scripts/gpu_check.sh on a GPU (this one has not yet run there).
// HOLMES_NCCL_SHARED_GPU=1 lets ranks that share a GPU use NCCL anyway by giving each process
// its own NCCL_HOSTID, so NCCL treats each as a host of its own and connects them through its
// socket transport: a test set-up for a machine with one GPU.
#pragma once

#include <memory>
#include <string>

#include "comm/process_group.hpp"
#include "engine/runtime/nccl_env.hpp"
#include "engine/runtime/startup.hpp"
#include "engine/spec/job_spec.hpp"

namespace holmes::parallel {

// This rank's answer before the agreement. Pure: env is the process environment, cuda whether
// job.device is cuda, nccl_why empty when libnccl is usable (else why not), local_world the
// processes on this node, gpus this node's GPUs. UserError naming the variable for a value of
// HOLMES_NCCL or HOLMES_NCCL_SHARED_GPU other than 0 or 1, and when HOLMES_NCCL=1 but NCCL
// cannot be used here.
struct NcclChoice {
  bool use = false;
  bool required = false;    // HOLMES_NCCL=1
  bool shared_gpu = false;  // ranks share a GPU and HOLMES_NCCL_SHARED_GPU=1 lets them use NCCL
  bool by_default = false;  // !use only because HOLMES_NCCL is unset (NCCL is opt-in for now)
  std::string why;          // when !use: the reason, for the log ("" when job.device is not cuda)
};
NcclChoice choose_nccl(const runtime::EnvMap& env, bool cuda, const std::string& nccl_why, int local_world, int gpus);

struct DeviceGroups {
  std::unique_ptr<comm::ProcessGroup> tp, pp, dp, embedding;  // null where the plan has none
  std::vector<std::string> log;  // lines for this rank's start-up log
};

// The NCCL groups of this rank (empty when NCCL is not used: see above). Call after the
// backend was made (it sets this process's GPU) and before the trainer; collective over the
// world group. CommError when a communicator cannot be created (naming the group and who
// never joined), UserError as choose_nccl.
DeviceGroups make_device_groups(runtime::Runtime& rt, const spec::JobSpec& spec);

}  // namespace holmes::parallel
