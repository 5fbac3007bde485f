// This rank's parallel groups, made once: its coordinates in the tensor x pipeline x data grid
// and one Group per axis (group.hpp), each carrying host and backend buffers the way the plan
// chose (NCCL, Gloo staged through pinned host memory, Gloo on host memory). Start-up makes
// the communicators the plan lists (engine/runtime/startup.hpp) and wraps them here; a single
// process gets groups of one member. Everything that moves bytes between ranks (the pipeline
// stage, the distributed optimizer, the model's tensor-parallel sums, the job-wide sums) goes
// through these groups, which decide how; the parts themselves only express ordering.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/process_group.hpp"
#include "device/device_memory.hpp"
#include "engine/parallel/comm_clock.hpp"
#include "engine/parallel/group.hpp"
#include "model/tp_comm.hpp"

namespace holmes::parallel {

// Where this rank sits in the grid.
struct Coords {
  int tp_rank = 0, tp_size = 1;
  int pp_stage = 0, pp_size = 1;
  int dp_rank = 0, dp_size = 1;
  // parallel.outer diloco: this rank's replica; replicas train apart between outer syncs
  // (outer_sync.hpp). 1 otherwise (sync replicas are part of the data-parallel degree).
  int replica = 0, replicas = 1;
  // Where this rank's batches come from: the data-parallel rank among all replicas.
  int data_rank() const { return replica * dp_size + dp_rank; }
  int data_size() const { return replicas * dp_size; }
};

class ParallelGroups {
 public:
  // The communicators of one axis each: null for an axis of one member; `embedding` (the first
  // and last stage of this rank's pipeline, group rank 0 = first) only on those two stages
  // when pp > 1.
  struct Comms {
    comm::ProcessGroup* tp = nullptr;
    comm::ProcessGroup* pp = nullptr;
    comm::ProcessGroup* dp = nullptr;
    comm::ProcessGroup* embedding = nullptr;
    comm::ProcessGroup* outer = nullptr;  // host only: this coordinate in every replica
    comm::ProcessGroup* outer_side = nullptr;  // host only: the same members again (outer_overlap)
    // host only: the plan's pp-hop groups to the stage before (this rank is member 1) and
    // after (member 0), where a hop of a pipeline on Ethernet stays inside an RDMA island.
    comm::ProcessGroup* pp_prev = nullptr;
    comm::ProcessGroup* pp_next = nullptr;
  };

  // One process alone: every axis a group of one.
  ParallelGroups();
  // host: a host group (Gloo, in-process) for every axis of more than one member; device:
  // NCCL groups of the same members where the plan gives one. The communicators and `mem`
  // (the backend's memory) outlive this. std::invalid_argument (a wiring error) when a group
  // does not match the coordinates.
  ParallelGroups(const Coords& coords, Comms host, Comms device, device::DeviceMemory& mem,
                 Group::Options options = {});
  ParallelGroups(const ParallelGroups&) = delete;
  ParallelGroups& operator=(const ParallelGroups&) = delete;

  const Coords& coords() const { return coords_; }
  Group& tp() { return *tp_; }
  Group& pp() { return *pp_; }
  // The group that carries this stage's transfers to `peer_stage`, and the peer's rank in it:
  // the pp-hop group to a neighbouring stage where the plan gives one, else pp() (group rank =
  // stage).
  std::pair<Group*, int> pp_route(int peer_stage);
  // pp() and the hop groups: every group a pipeline transfer may take (drain, abandon).
  std::vector<Group*> pp_groups();
  Group& dp() { return *dp_; }
  Group& embedding() { return *embedding_; }
  Group& outer() { return *outer_; }
  // The outer exchange beside the inner steps (parallel.outer_overlap > 0): the outer group's
  // members on a communicator of their own, so what else runs on outer() (the sums across the
  // replicas of a validation or of agreeing the loss) is not queued behind it.
  Group& outer_side() { return *outer_side_; }
  // The time this rank waited on communication (all groups).
  CommClock& clock() { return clock_; }

  // values[i] <- the sum over every rank of the job, group after group (dp, tp, pp). Each
  // double travels as two floats (high part + rounding rest) so no member's value is rounded
  // to float before the sum; the sum of the high parts is still a float sum (~1e-7 relative),
  // plenty for a loss or a gradient norm.
  void sum_over_job(std::span<double> values);
  // The same over the outer group (diloco replicas; nothing with one replica).
  void sum_over_replicas(std::span<double> values);
  // One line per axis of more than one member: how its buffers travel (for the start-up log).
  std::vector<std::string> describe() const;

 private:
  Coords coords_;
  CommClock clock_;
  std::unique_ptr<Group> tp_, pp_, dp_, embedding_, outer_, outer_side_, pp_prev_, pp_next_;
};

// The model's tensor-parallel sums (model/tp_comm.hpp) over the tp group, in the compute order.
class GroupTensorParallel final : public model::TensorParallelComm {
 public:
  explicit GroupTensorParallel(Group& tp) : tp_(tp) {}
  int size() const override { return tp_.size(); }
  int rank() const override { return tp_.rank(); }
  void all_reduce_sum(float* data, size_t count) override;
  void all_reduce_max(float* data, size_t count) override;
  void all_reduce_sum_bf16(void* data, size_t count) override;

 private:
  Group& tp_;
};

}  // namespace holmes::parallel
