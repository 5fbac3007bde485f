// This rank's parallel groups, made once: its coordinates in the tensor x pipeline x data grid
// and one Group per axis (group.hpp), each carrying host and backend buffers the way the plan
// chose (NCCL, Gloo staged through pinned host memory, Gloo on host memory). Start-up makes
// the communicators the plan lists (engine/runtime/startup.hpp) and wraps them here; a single
// process gets groups of one member. Everything that moves bytes between ranks (the pipeline
// stage, the distributed optimizer, the model's tensor-parallel sums, the job-wide sums) goes
// through these groups, which decide how; the parts themselves only express ordering.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/process_group.hpp"
#include "device/device_memory.hpp"
#include "engine/parallel/comm_clock.hpp"
#include "engine/parallel/group.hpp"
#include "engine/schedule/axes.hpp"
#include "model/tp_comm.hpp"

namespace holmes::parallel {

// One communicator of this rank, as start-up made it from a group of the plan: its kind (the
// axes it spans and its purpose), the host group (Gloo, in-process) and, where the plan gives
// one, a device group (NCCL) of the same members for device buffers.
struct GroupComms {
  schedule::GroupKind kind;
  comm::ProcessGroup* host = nullptr;
  comm::ProcessGroup* device = nullptr;
};

class ParallelGroups {
 public:
  // One process alone: every axis a group of one.
  ParallelGroups();
  // place: this rank's coordinate and each axis's degree; comms: this rank's groups, in any
  // order: a kAxes group for every axis of degree > 1 (group rank = the coordinate), the
  // embedding group {first, last stage} on those two stages when pp > 1, the pp-hop groups
  // where the plan has them, a side group where the job wants one. The communicators and
  // `mem` (the backend's memory) outlive this. std::invalid_argument (a wiring error) when a
  // group is missing, doubled or does not match the place.
  ParallelGroups(const schedule::Place& place, std::span<const GroupComms> comms, device::DeviceMemory& mem,
                 Group::Options options = {});
  ParallelGroups(const ParallelGroups&) = delete;
  ParallelGroups& operator=(const ParallelGroups&) = delete;

  const schedule::Place& place() const { return place_; }
  // This rank's group of `kind`; a group of one where it is in none (an axis of degree 1, the
  // embedding group off the first and last stage, no side group).
  Group& group(schedule::GroupKind kind);
  Group& group(schedule::Axis axis) { return group(schedule::GroupKind{axis}); }
  // The group that carries this stage's transfers to `peer_stage`, and the peer's rank in it:
  // the pp-hop group to a neighbouring stage where the plan gives one, else the pp group
  // (group rank = stage).
  std::pair<Group*, int> pp_route(int peer_stage);
  // The pp group and the hop groups: every group a pipeline transfer may take (drain, abandon).
  std::vector<Group*> pp_groups();
  // The time this rank waited on communication (all groups).
  CommClock& clock() { return clock_; }

  // values[i] <- the sum over every rank of the job, group after group (dp, tp, pp). Each
  // double travels as two floats (high part + rounding rest) so no member's value is rounded
  // to float before the sum; the sum of the high parts is still a float sum (~1e-7 relative),
  // plenty for a loss or a gradient norm.
  void sum_over_job(std::span<double> values);
  // The same over the outer group (diloco replicas; nothing with one replica).
  void sum_over_replicas(std::span<double> values);
  // One line per group of more than one member: how its buffers travel (for the start-up log).
  std::vector<std::string> describe() const;
  // An elastic job after a loss (docs/elastic.md): the place renumbered over the surviving
  // replicas (every other coordinate and degree as before) and the outer group over them (null:
  // one replica left). The groups inside the replica stay; the outer and side groups are taken
  // out and returned, for the caller to drop once nothing refers to them any more.
  std::vector<std::unique_ptr<Group>> replace_replica_groups(const schedule::Place& place, comm::ProcessGroup* outer);

 private:
  schedule::Place place_;
  device::DeviceMemory* mem_ = nullptr;  // the backend's memory (null: one process alone)
  Group::Options options_;
  CommClock clock_;
  // Every kind but the hops; a kind asked for and not given: a group of one, made then.
  std::map<schedule::GroupKind, std::unique_ptr<Group>> groups_;
  std::unique_ptr<Group> hop_prev_, hop_next_;  // to the stage before (member 1) and after (member 0)
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
