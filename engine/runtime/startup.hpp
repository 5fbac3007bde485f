// Start-up of one rank of a multi-process job (DESIGN.md "Data flow of one run"), in phases:
//   1. open the job's rendezvous store (rank 0 hosts tcp://MASTER_ADDR:MASTER_PORT, or the
//      spec's cluster.rendezvous), guarded by the per-job token;
//   2. local rank 0 of every node discovers its node (NICs from cluster.sysfs_root, the CPU
//      as local-world-size devices; named HOLMES_NODE_NAME when that is set); the reports
//      are all-gathered and become the cluster topology (cluster.topology overlaid if given);
//   3. every rank computes make_plan (pure) and the ranks all-gather (plan hash, spec digest,
//      topology digest): any difference from rank 0 stops the job naming what differs and who;
//   4. this rank's communicators of the plan (one per group it is in: tp, pp, dp, embedding,
//      pp-hop, outer, world) are created with Gloo, in the plan's group order (the same on
//      every rank, so creation cannot deadlock);
//   5. once the backend chose this process's GPU (connect_device_groups): the NCCL
//      communicators the plan lists for this rank, if any. Whether device buffers use NCCL is
//      the plan's choice (parallel.nccl), so every rank already agrees: no further vote;
//      then the executor's groups over both (executor_groups).
// Start-up hands the trainer this rank's RankPlan (plan::rank_plan, phase 3) and its groups.
// Every wait ends after cluster.timeout_s with a message naming the ranks that are missing.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/gloo_group.hpp"
#include "comm/process_group.hpp"
#include "comm/store.hpp"
#include "engine/launch/launch_env.hpp"
#include "engine/parallel/groups.hpp"
#include "engine/plan/plan.hpp"
#include "engine/plan/rank_plan.hpp"
#include "engine/runtime/membership.hpp"
#include "engine/spec/job_spec.hpp"
#include "engine/topo/topology.hpp"

namespace holmes::runtime {

// One communicator of this rank: the plan group it was made from (its index in plan.groups)
// and that group's kind (a side group: the kind's purpose kSide, the same plan group).
struct RankComm {
  int plan_group = -1;
  schedule::GroupKind kind;
  std::unique_ptr<comm::ProcessGroup> group;
};

struct Runtime {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  int local_world = 1;
  int node = 0;  // this rank's node index in the topology (and the plan)
  std::shared_ptr<comm::Store> store;
  topo::ClusterTopology topology;
  plan::Plan plan;
  uint64_t plan_hash = 0;
  schedule::RankPlan rank_plan;  // this rank's slice of the plan: what its trainer runs
  // parallel.elastic: this rank started after its job began and rejoins (ElasticSession::join):
  // start-up waited until the survivors admitted its replica (`admission`, the next
  // generation's membership) and made no group across replicas; its rank_plan is that of a
  // replica alone (replica 0 of 1, the global batch of one replica) until it joins.
  bool joining = false;
  std::optional<MembershipDecision> admission;
  // Put before the plan's group names ("e<G>/" for a joiner admitted into generation G, "" at
  // the start): the groups a rejoining replica makes inside itself meet no key of the start's.
  std::string group_prefix;
  // This rank's Gloo groups, one per group of the plan it is in that has more than one member
  // (group rank == this rank's coordinate: checked), in plan order; after the outer group a
  // side group of the same members when parallel.outer_overlap > 0 (named "<outer>-side"),
  // which carries the outer exchange beside the inner steps while the outer group sums each
  // step's loss.
  std::vector<RankComm> comms;
  // The group of `kind`, null where this rank has none (a degree of 1; the embedding group off
  // the first and last stage). For the pp-hop groups, of which a rank may have two: hop().
  comm::ProcessGroup* group(schedule::GroupKind kind) const;
  // The plan's pp-hop group from this rank's stage to `peer_stage` (a neighbour), or null.
  comm::ProcessGroup* hop(int peer_stage) const;
  comm::ProcessGroup& world_group() const;  // every rank, for job-wide reductions
};

// The plan's group of `kind` that `rank` is in (the world group, its outer group); null when none.
const plan::Group* plan_group_of(const plan::Plan& plan, schedule::GroupKind kind, int rank);

// Collective over every rank of `rt`: one more Gloo group of all of them, named `name` under
// rt.group_prefix, over the world group's network, with cluster.timeout_s; in one process a
// group of one. For traffic that must not meet the loop's world-group reductions.
std::unique_ptr<comm::ProcessGroup> make_job_group(const Runtime& rt, const spec::JobSpec& spec, const std::string& name);

// Runs phases 1-4. Errors: UserError (bad spec / environment, exit 2), StoreError and
// CommError (a rank is missing or died, exit 1), std::runtime_error when the ranks disagree.
Runtime start_runtime(const spec::JobSpec& spec, const launch::LaunchEnv& env);

// Phase 5: the NCCL communicators of this rank (plan::nccl_communicators), in plan order, after
// NCCL's process-wide variables (nccl_env.hpp) and, on a node whose ranks share a GPU (the
// plan allows it with parallel.nccl on), an NCCL_HOSTID of its own for this process. Call
// after the backend was made (it set this process's GPU). Empty where the plan has no NCCL
// group. CommError when a communicator cannot be created (naming the group and who never
// joined), UserError for the environment (nccl_env.hpp).
struct DeviceComms {
  std::vector<RankComm> comms;   // the NCCL groups of the plan for this rank, in plan order
  std::vector<std::string> log;  // lines for this rank's start-up log
  comm::ProcessGroup* group(schedule::GroupKind kind) const;  // null where the plan has none
  void abort_all() const noexcept;  // ProcessGroup::abort on each
};

// Declared after the objects that own device memory the NCCL groups may still be using (the
// trainer), so that it is destroyed before them: when the scope is left by an exception it
// aborts every NCCL group first. Otherwise freeing that memory (cudaFree) would wait for NCCL
// kernels spinning against a dead peer, and the rank would report only after the operation's
// time-out (up to cluster.timeout_s).
class AbortOnUnwind {
 public:
  explicit AbortOnUnwind(const DeviceComms& comms) : comms_(comms) {}
  ~AbortOnUnwind() {
    if (std::uncaught_exceptions() > unwinding_) comms_.abort_all();
  }
  AbortOnUnwind(const AbortOnUnwind&) = delete;
  AbortOnUnwind& operator=(const AbortOnUnwind&) = delete;

 private:
  const DeviceComms& comms_;
  int unwinding_ = std::uncaught_exceptions();
};
DeviceComms connect_device_groups(Runtime& rt, const spec::JobSpec& spec);

// Then the executor's groups of this rank, in one loop over its communicators: each with the
// NCCL group phase 5 made for the same plan group, if any (the world group stays the loop's:
// host values only). The communicators and `mem` (the backend's memory) outlive them.
std::unique_ptr<parallel::ParallelGroups> executor_groups(const Runtime& rt, const DeviceComms& device,
                                                          device::DeviceMemory& mem);

// Phase 4 alone, for a start-up opened again on the survivors of a loss (replan.hpp): this
// rank's groups of rt.plan over rt.store, in plan order.
void create_rank_groups(Runtime& rt, const spec::JobSpec& spec);
// Rank 0 waits until every rank counted itself in after reading all-gather `name` (rank 0 may
// host the store: it must not go on, and perhaps exit, while others still read).
void wait_all_have_read(comm::Store& store, const std::string& name, int rank, int world, comm::Millis timeout);

// ---- the pieces, exposed for tests ----

// Whether a group of this kind spans replicas (the world group, the groups with the replica
// axis): what an elastic job rebuilds after a loss and a rejoining rank makes once admitted.
bool spans_replicas(schedule::GroupKind kind);
// Whether the job's ranks beat in the store (liveness.hpp): an elastic job with replicas.
bool beats(const spec::JobSpec& spec);
// cluster.timeout_s as the groups' default time-out.
comm::Millis timeout_of(const spec::JobSpec& spec);
// A group's time-out: cluster.timeout_s, but 2 x cluster.timeout_s + 10 s for a group inside a
// replica of an elastic job with replicas. A rank may wait there for a peer of its replica that
// is itself waiting, up to cluster.timeout_s, on a frozen rank of another replica in a group
// across replicas; that peer then takes the failure up at the step's verdict (elastic sync) or
// as the exchange begins (diloco) and comes, so the replica goes on whole. A dead peer inside
// the replica still fails the group at once; a frozen one is found across replicas first.
comm::Millis group_timeout(const spec::JobSpec& spec, schedule::GroupKind kind);
// The coordinate a group's rank must equal for this rank: its coordinate on the group's axis,
// 0 for the first stage in the embedding group, the rank itself in the world group, 0 for the
// lower stage of a pp-hop group.
int expected_group_rank(const plan::Group& g, const plan::RankInfo& me);

// The store url: cluster.rendezvous, where "auto" means tcp://MASTER_ADDR:MASTER_PORT.
std::string rendezvous_url(const spec::JobSpec& spec, const launch::LaunchEnv& env);
// HOLMES_JOB_TOKEN (env.job_token) when set; else one every rank of this job derives alike
// from the job name and the master address (keeps other jobs out, not a secret).
std::string job_token(const spec::JobSpec& spec, const launch::LaunchEnv& env);

// Phase 2 without the store: per-rank published texts -> node reports in node order.
// entries[r] is "node <n> local <l>\n" followed, for local rank 0, by its encoded report.
std::string node_entry(int node_rank, int local_rank, const topo::NodeReport* report);
struct GatheredNodes {
  std::vector<topo::NodeReport> reports;  // one per node, by node rank
  std::vector<int> node_of;               // per global rank
  std::vector<int> local_of;              // per global rank
};
// Throws std::runtime_error naming the ranks when a node has no local rank 0 or the node
// ranks are not 0..N-1.
GatheredNodes gather_nodes(const std::vector<std::string>& entries);

// Phase 3 without the store: one "plan <hash> spec <digest> topology <digest>" line per rank.
std::string agreement_line(uint64_t plan_hash, uint64_t spec_digest, uint64_t topology_digest);
// Throws std::runtime_error naming each input that differs from rank 0's and the ranks that
// disagree ("plan hash differs from rank 0's on ranks [2, 3]; ...").
void check_agreement(const std::vector<std::string>& lines);
uint64_t spec_digest(const spec::JobSpec& spec);
uint64_t topology_digest(const topo::ClusterTopology& topology);

// Checks that the plan puts every rank where the launcher started it (plan.world == world,
// same node and local rank); UserError naming the parallel.* keys and the world otherwise.
void check_plan_matches_job(const plan::Plan& plan, const spec::JobSpec& spec, const GatheredNodes& nodes);

// Where group `g` binds: loopback when it stays inside one node (or the whole job runs on
// this machine), else the plan's interface for it.
comm::GlooNet group_net(const plan::Group& g, bool single_machine);

}  // namespace holmes::runtime
