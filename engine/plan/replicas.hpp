// Replicas (parallel.replicas > 1, docs/diloco.md): the world split into N copies of one
// tensor x pipeline x data plan, each placed inside one island (or a run of islands) by
// today's planner, and how they stay in step (parallel.outer):
//   sync    one data-parallel all-reduce spans the replicas every step: the plan of data
//           degree dp x N over the whole cluster; with parallel.elastic (HSDP) the replicas
//           are laid out as diloco's, a data-parallel group inside each, and every step each
//           rank's owned gradient shard is all-reduced over its outer group;
//   diloco  each replica trains alone; every inner_steps steps the members of an outer group
//           (one per tensor x pipeline x data coordinate, across replicas) exchange the change
//           of their weights over Ethernet and take one Nesterov step.
// Pure, as the rest of the planner.
#pragma once

#include <string>
#include <vector>

#include "engine/plan/plan.hpp"
#include "engine/schedule/outer_payload.hpp"

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

// make_plan for parallel.replicas > 1 (make_plan calls it): each replica and the variants it
// prices are planned by plan_one_replica on specs of one replica with the degrees fixed.
Plan make_replica_plan(const spec::JobSpec& spec, const topo::ClusterTopology& topology);

// Small messages (a few floats) cost more in headers than in payload. Gloo sends an unbound
// buffer in three operations, each a 48-byte preamble (six size_t) in its own TCP segment with
// 66 bytes of Ethernet, IPv4 and TCP (with timestamps) headers: the sender's send-ready notice,
// the receiver's recv-ready notice and the data; plus one 66-byte ACK frame (the others ride
// the notices). 408 bytes a message (measured 403 to 417: docs/results/cost-model-history.md).
inline constexpr double kSmallMessageOverhead = 3 * (48 + 66) + 66;
// Bytes all `members` send together in one Gloo ring all-reduce of a few `floats` (Gloo's
// ring cuts the buffer into 2 x members segments of ceil(floats / (2 members)) floats and
// forwards each non-empty one members - 1 times in the reduce-scatter and again in the
// all-gather): 2 (members - 1) (4 floats + non-empty segments x kSmallMessageOverhead).
double small_all_reduce_bytes(double floats, int members);
// The small messages a replica job (parallel.replicas > 1) sends over Ethernet per step,
// amortized: with diloco the [loss, stop, replicas' slots] sum (agreement_floats) over each
// outer group before each fragment's exchange (fragments / inner_steps a step), and in both modes the job-wide maximum (3 + 2 world floats) over the world group
// every log.interval steps (diloco: once per inner_steps at most); each counted whole when its group runs over Ethernet (a group that
// crosses islands binds the Ethernet interface, so its pairs inside an island use it too).
// Elastic sync adds its [loss, stop] sum over each outer group every step and, for each rank
// off rank 0's node, its store round trips (kVerdictRoundTrips, 2 kStoreMessageBytes each).
double small_ethernet_bytes_per_step(const spec::JobSpec& spec, const Plan& plan);
// One message of the TCP store (a request or a reply of a few dozen bytes: key, value, length
// prefixes) in its own segment with 66 bytes of headers, and the ACK frame it draws.
inline constexpr double kStoreMessageBytes = 66 + 48 + 66;
// Elastic sync: a rank's round trips to the store each step: counting in for the update's
// verdict, reading it, and reading whether a failure was announced (engine/runtime/elastic.cpp).
inline constexpr int kVerdictRoundTrips = 3;
// Elastic sync: the first rank polls the store every 2 ms for the others' count before it
// writes the verdict (engine/runtime/elastic.cpp): on average half a period.
inline constexpr double kVerdictPollS = 0.001;

// diloco's sum of [loss, stop flags, one slot per replica] across the replicas
// (Agreement::kAtSyncs, engine/parallel/step_runner.hpp): 2 + N doubles (4 + 2 N floats) in a
// ring all-reduce over each outer group (2 (N - 1) latencies, `ring_s`), on the training thread
// before each fragment's exchange starts, so `fragments` of them every inner_steps steps.
// Per step: ring_s x fragments / inner_steps. The extra sums at a validation, a checkpoint and
// the last step (where the replicas meet anyway) are not priced; the wait for the slowest
// replica at each sum is drift_per_step_s (below).
double agreement_floats(int replicas);
double agree_per_step_s(double ring_s, int inner_steps, int fragments);

// The expected maximum of n independent standard normal variables (0 for n <= 1; 0.5642 for
// 2, 1.0294 for 4), by numerical integration of x n phi(x) Phi(x)^(n-1).
double expected_max_normal(int n);
// The replicas' drift, per step: between two sums across the replicas (inner_steps /
// fragments steps apart) each replica runs its steps alone, and at the sum every replica waits
// for the one whose steps took longest. With a step's time scattered by `drift_s` (the
// calibration's outer.drift_ms: the standard deviation of one step's time, as the waits a job
// measured at its sums imply) independently from step to step and replica to replica, a
// replica's time over k steps scatters by drift_s sqrt(k), and the slowest of N is
// expected_max_normal(N) drift_s sqrt(k) behind the mean replica: the wait at each sum, which
// the plan adds to the mean step it prices. Per step: that x fragments / inner_steps.
double drift_per_step_s(double drift_s, int replicas, int inner_steps, int fragments);

// The three ways of spanning the islands, priced side by side for --plan-only (and filled in
// Plan::across when replicas > 1): pipeline across islands (one plan, pipeline degree
// pp x N), synchronous data parallelism across (data degree dp x N), DiLoCo across.
std::vector<AcrossMode> price_across(const spec::JobSpec& spec, const topo::ClusterTopology& topology);

}  // namespace holmes::plan
