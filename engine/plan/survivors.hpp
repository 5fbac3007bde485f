// The plan of a job that lost nodes (issue 50: a single pipeline across islands that loses a
// node goes on without a new launch): the same job on the nodes that remain. Pure, as the rest
// of the planner; the runtime that stops the ranks, makes the new groups and reshards the
// state is the caller.
//
// What is kept and what is searched again:
//   - the model, the global batch, the sequence, the schedule and precision keys: the job the
//     user asked for, on fewer devices (each step trains the same tokens, so the learning-rate
//     schedule and the data stream go on unchanged);
//   - parallel.tensor when it still divides every surviving node's devices (tensor groups stay
//     inside a node), else searched again; parallel.pipeline and parallel.data searched again
//     (auto): a lost node takes a stage or a data-parallel rank with it, and which of the two
//     should shrink depends on what is left (memory, islands);
//   - the micro-batch size when the user fixed it and it still divides the batch of some data
//     degree, else searched again.
// Replicas (parallel.replicas > 1) lose whole replicas instead (docs/elastic.md): not here.
#pragma once

#include <string>
#include <vector>

#include "engine/plan/plan.hpp"
#include "engine/spec/job_spec.hpp"
#include "engine/topo/topology.hpp"

namespace holmes::plan {

// `topology` without the nodes in `lost` (node indices; duplicates and order do not matter):
// the remaining nodes in their order, islands that keep no node dropped, island ids and node
// indices renumbered densely. Each island's per-node RDMA rate and the calibration are kept,
// and the warnings but those naming a lost node ("node '<host>' ...").
// std::invalid_argument for an index out of range.
topo::ClusterTopology without_nodes(const topo::ClusterTopology& topology, const std::vector<int>& lost);

struct SurvivorPlan {
  bool fits = false;  // false: `why` says what stands in the way; the job must stop
  std::string why;
  spec::JobSpec spec;               // the degrees the new plan was searched with
  topo::ClusterTopology topology;   // the surviving nodes (without_nodes)
  std::vector<int> old_node;        // per node of `topology`: its index before the loss
  Plan plan;                        // valid when fits
};

// The plan of `spec`'s job on `topology` less the nodes in `lost`. Never throws for what the
// survivors cannot do (no node left, the model no longer fits their memory, no layout of the
// batch on the devices left): fits = false and `why` names it with the numbers, starting with
// the devices left. std::invalid_argument for a spec of replicas or a node index out of range.
SurvivorPlan plan_on_survivors(const spec::JobSpec& spec, const topo::ClusterTopology& topology,
                               const std::vector<int>& lost);

}  // namespace holmes::plan
