// Re-planning a single pipeline on the nodes that remain (parallel.elastic with one replica,
// docs/elastic.md "A single pipeline that loses a node"): start-up opened again on the
// survivors, with the rendezvous store as the arbiter, as for elastic replicas (elastic.hpp).
//
// A generation G is the set of ranks training under one plan (0: the job as started). Its
// recovery keys live under "replan/g<G>/" of the job's store; the start-up of generation
// G >= 1 (agreement, groups, the loop's checkpoint keys) under the prefix "replan/g<G>/run/",
// so no key or group of one generation meets another's.
//   - A rank whose training of generation G failed with a communication error (a peer died,
//     closed its connections, or let cluster.timeout_s pass) has unwound its trainer; it
//     aborts and closes its groups (so a peer blocked on it fails at once rather than at its
//     time-out) and registers alive with the steps it had finished (replan/g<G>/alive/<rank>).
//   - The first to win replan/g<G>/leader waits until every rank of G registered, or no new
//     registration came for the settle window (min(5 s, cluster.timeout_s)), at most
//     cluster.timeout_s + the window, and writes the decision: the nodes lost (a node is lost
//     when any of its ranks did not register) and the most steps a survivor had finished.
//   - Everyone reads it and computes the same survivors' plan (plan::plan_on_survivors, pure):
//     a rank on a lost node stops saying so; when the survivors cannot hold the model every
//     rank stops saying why (the checkpoints are untouched); the others open start-up again
//     on the survivors (reopen): new ranks (node by node, as a launcher numbers them), the
//     plan hash agreed, new groups. The caller then trains again from the last checkpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/plan/plan.hpp"
#include "engine/plan/survivors.hpp"
#include "engine/runtime/startup.hpp"
#include "engine/spec/job_spec.hpp"

namespace holmes::runtime {

// Whether this job re-plans on its survivors after a loss: parallel.elastic without replicas,
// more than one rank.
bool replans_on_loss(const spec::JobSpec& spec, int world);

// UserError (exit 2, naming parallel.elastic and what is accepted) for a job that re-plans on
// loss but runs on one node: no node would remain after a loss.
void check_replan_nodes(const spec::JobSpec& spec, int nodes, int world);

// ---- pure pieces ----

// The nodes of `plan` (ascending) with a rank missing from `alive` (ranks of the plan, any
// order; ranks outside the plan are ignored).
std::vector<int> lost_nodes(const plan::Plan& plan, const std::vector<int>& alive);

// Each rank of `before` mapped to its rank in `after` (the survivors' plan of `before`'s
// cluster): a node that survived keeps its ranks, at their local ranks, on its new index
// (after.old_node); -1 for a rank on a lost node. std::logic_error when `after` has no rank
// at a survivor's place (a plan that does not use every surviving device).
std::vector<int> survivor_ranks(const plan::Plan& before, const plan::SurvivorPlan& after);

// What the leader of a broken generation decides.
struct ReplanDecision {
  int generation = 0;               // the generation it makes (the broken one + 1)
  std::vector<int> lost_nodes;      // nodes of the broken generation's plan, ascending
  std::vector<int> missing_ranks;   // ranks that did not register, ascending
  int64_t steps_done = 0;           // the most steps a survivor had finished
};
// As the store holds it, and back (std::runtime_error on a malformed text).
std::string encode_replan(const ReplanDecision& d);
ReplanDecision decode_replan(const std::string& text);

// ---- the session ----

class ReplanSession {
 public:
  // rt: generation 0, as start_runtime made it; it outlives the session and becomes each new
  // generation's runtime in reopen(). UserError (exit 2, naming parallel.elastic) for a job on
  // one node: no node would remain after a loss.
  ReplanSession(Runtime& rt, const spec::JobSpec& spec);

  int generation() const { return generation_; }
  // The spec the current generation was planned with (the user's, then the survivors').
  const spec::JobSpec& spec() const { return spec_; }

  struct Outcome {
    ReplanDecision decision;
    plan::SurvivorPlan survivors;  // fits; its spec is the next generation's
    int new_rank = -1;             // this rank's in the next generation
  };
  // After this generation's training failed with `what` (its trainer already unwound): closes
  // rt's groups, registers, decides or reads the decision, plans on the survivors. ElasticStop
  // (exit 1, the message says why) when this rank's node was lost, when the survivors cannot
  // hold the model, or when the store failed.
  Outcome recover(const std::string& what, int64_t steps_done);
  // Start-up opened again: rt becomes the next generation's (rank, world, node, topology, plan,
  // rank plan, store prefix, groups) once every survivor agreed on the plan.
  void reopen(const Outcome& o);

 private:
  std::string key(const std::string& name) const;
  ReplanDecision lead();
  void close_groups();
  void hold_store_until_read(const ReplanDecision& d) const;  // before a stop: see the .cpp

  Runtime& rt_;
  spec::JobSpec spec_;
  std::shared_ptr<comm::Store> base_;  // the job's store, unprefixed
  const double timeout_s_, settle_s_;
  int generation_ = 0;
  const int start_rank_;  // this process's rank at the start (0: it hosts a tcp:// store)
};

}  // namespace holmes::runtime
