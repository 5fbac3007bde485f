// Replicas (parallel.replicas > 1, docs/diloco.md): the world split into N copies of one
// tensor x pipeline x data plan, each placed inside one island (or a run of islands) by
// today's planner, and how they stay in step (parallel.outer):
//   sync    one data-parallel all-reduce spans the replicas every step: the plan of data
//           degree dp x N over the whole cluster (today's behaviour);
//   diloco  each replica trains alone; every inner_steps steps the members of an outer group
//           (one per tensor x pipeline x data coordinate, across replicas) exchange the change
//           of their weights over Ethernet and take one Nesterov step.
// Pure, as the rest of the planner.
#pragma once

#include <string>
#include <vector>

#include "engine/plan/plan.hpp"

namespace holmes::plan {

// Devices first_local .. first_local + devices - 1 of node `node`.
struct ReplicaPart {
  int node = 0, first_local = 0, devices = 0;
  bool operator==(const ReplicaPart&) const = default;
};
// The devices of each replica: the nodes' devices in island order (islands by id, nodes
// ascending), cut every world/N devices (a replica smaller than a node shares it). UserError
// naming parallel.replicas when N does not divide the devices.
std::vector<std::vector<ReplicaPart>> split_replicas(const topo::ClusterTopology& topology, int replicas);

// The topology of those devices alone (islands renumbered in order of first appearance).
topo::ClusterTopology sub_topology(const topo::ClusterTopology& topology, const std::vector<ReplicaPart>& parts);

// make_plan for parallel.replicas > 1 (make_plan calls it).
Plan make_replica_plan(const spec::JobSpec& spec, const topo::ClusterTopology& topology);

// Bytes one member of an outer group sends per outer sync of `elements` weights as
// outer_dtype (int8: one fp32 scale per kOuterChunk values), over a ring all-gather of
// `replicas` members: (N - 1) payloads. The runtime (engine/parallel/outer_sync.hpp) sends
// exactly this; a test ties them.
inline constexpr int kOuterChunk = 256;
double outer_payload_bytes(spec::OuterDtype dtype, double elements);

// The three ways of spanning the islands, priced side by side for --plan-only (and filled in
// Plan::across when replicas > 1): pipeline across islands (one plan, pipeline degree
// pp x N), synchronous data parallelism across (data degree dp x N), DiLoCo across.
std::vector<AcrossMode> price_across(const spec::JobSpec& spec, const topo::ClusterTopology& topology);

}  // namespace holmes::plan
