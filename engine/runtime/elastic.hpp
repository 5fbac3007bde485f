// The elastic session of a diloco job (parallel.elastic, docs/elastic.md): the runtime's side of
// parallel::ReplicaRecovery, with the rendezvous store as the arbiter.
//
// A generation G is the set of ranks training together (G = 0: the whole job). Every key it
// uses lives under "elastic/g<G>/", and its groups across replicas are named "e<G>/<plan
// name>" (store prefix "pg/e<G>/..."), so no key of one generation meets another's.
//   - A rank whose group across replicas fails (a peer died, closed its connections, or let
//     the group's time-out pass) announces it (elastic/g<G>/broken), closes its groups across
//     replicas (so peers blocked on it fail at once rather than at their time-out), and
//     registers alive with the step it is in (elastic/g<G>/alive/<rank>). Every other rank
//     meets the failure in its next collective across replicas and does the same; a diloco
//     rank that reads the announcement at the end of a step before that (its replica behind)
//     says it is coming (elastic/g<G>/coming/<rank>) and trains on to that collective.
//   - The first to win elastic/g<G>/leader waits until every member registered, or no new
//     registration came for the settle window (min(5 s, cluster.timeout_s)) after its own and
//     no rank that is coming is missing, at most cluster.timeout_s + the window, then writes
//     decide_membership's decision
//     (membership.hpp) to elastic/g<G>/decision.
//   - Everyone reads it: a rank of a lost replica exits naming the ranks its replica misses;
//     when the job cannot go on, every rank stops saying why; the others make the groups of
//     the next generation (its number drawn from elastic/generation by the leader: the world
//     group and their outer group over the surviving ranks) and hand the trainer its
//     renumbered place.
// Outer exchanges: after its exchange each rank counts itself in elastic/g<G>/x<step>; the
// generation's first rank (its lowest, the job's leader) writes the verdict
// once: 1 when every member counted in, 0 when a failure was announced first or the time-out
// passed (then it announces one). A rank applies the exchange only on verdict 1; on 0 every
// member rolls back to before it and redoes it over the survivors, so all hold the same bits.
// Rejoin: a late rank registers elastic/join/<rank>; the first rank admits a lost replica all
// of whose ranks asked in an exchange's verdict ("1 admit", the next generation's membership in
// elastic/g<G>/admission), so every survivor learns it at the same exchange. The joiners make
// their groups inside the replica under that generation's names ("e<G+1>/dp1"), build their
// trainer, and at the start of the survivors' next step the world and outer groups are made
// with them; each joiner takes the state of replica 0's rank at its coordinate.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/parallel/replica_recovery.hpp"
#include "engine/runtime/liveness.hpp"
#include "engine/runtime/membership.hpp"
#include "engine/runtime/startup.hpp"
#include "engine/spec/job_spec.hpp"

namespace holmes::runtime {

// This rank's replica was lost (a rank of it is missing) or the job cannot go on: run_job
// prints the message and exits 1 without the failure blame of fail_rank (the world it would
// blame in is gone).
class ElasticStop : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether this rank starts after its elastic job began (a worker started again, by hand, a
// launcher or Slurm): then it rejoins instead of making the groups of the start. Called by
// start-up before any group.
bool late_rank(comm::Store& store);

// A late rank: registers elastic/join/<rank> and waits (bounded, saying so) until the survivors
// admit its replica at an outer sync, which they do once every rank of that replica asked.
// Returns the admission: the next generation's membership, whose number names the groups the
// joiners make (their groups inside the replica included: the start's names hold stale keys).
// ElasticStop when the job ended (job_over) or the wait ran out.
MembershipDecision await_admission(comm::Store& store, const plan::Plan& plan, int rank, double timeout_s);

// Says in the store that the elastic job ended (finished, or stopped without quorum), and why:
// ranks still waiting to rejoin stop instead of waiting out their time.
void job_over(comm::Store& store, const std::string& why);
inline constexpr const char* kJobFinished = "it finished";  // job_over's `why` for a job that trained every step

class ElasticSession final : public parallel::ReplicaRecovery {
 public:
  // rt (started, its comms made) outlives the session; its world and outer groups pass to the
  // session at the first loss.
  ElasticSession(Runtime& rt, const spec::JobSpec& spec);
  ~ElasticSession() override;

  // The world group of the current generation (the loop's job-wide figures).
  comm::ProcessGroup& world();
  // The current generation: its number, its members (ranks numbered as at the start, ascending)
  // and this rank's index among them.
  int generation() const { return generation_; }
  int member_count() const { return static_cast<int>(members_.size()); }
  int member_index() const;
  // For a wait through the store on members of this generation (by index, as member_index
  // numbers them) that have not come: why they will not (a member known gone: its process ended
  // or its beat is older than cluster.timeout_s; or a failure announced in this generation, so
  // every member is on its way to regroup), or nothing. A store that does not answer: nothing.
  std::optional<std::string> wait_in_vain(const std::vector<int>& missing);
  // Whether this rank leads the job now: the lowest rank of the generation (rank 0 while replica
  // 0 lives; after its loss, the first rank of the lowest replica left). It writes the job's
  // log, metrics, final weights and checkpoint manifests, and the exchanges' verdicts.
  bool leads() const { return rt_.rank == first_rank(); }
  // Whether a failure of this generation is known here and not yet resolved (announced, or
  // being recovered from): the leader then holds the job's rows, since it may be the one lost.
  bool unsettled() const { return unsettled_; }

  bool announced() override;
  void coming(int64_t step) override;
  bool exchange_complete(int64_t step) override;
  void refuse_update(int64_t step) override;
  void met_failure(int64_t step, const std::string& what, const std::string& later) override;
  parallel::ReplicaRegroup recover(int64_t step, bool exchange, const std::string& what) override;
  bool admitted(int64_t step) override;
  parallel::ReplicaRegroup admit() override;
  void joined() override;
  // A late rank (start-up's Runtime::joining, admitted there: Runtime::admission): makes the
  // new generation's world and outer groups with the survivors and returns its layout and the
  // step after which it was admitted.
  std::pair<parallel::ReplicaRegroup, int64_t> join();

 private:
  std::string key(const std::string& name) const;
  int first_rank() const;  // the lowest rank of the generation
  void close_groups();  // aborts and closes this rank's groups across replicas
  // "holmes-train: rank R: elastic: <what> (step S, <when>); <then>": a failure met.
  void say_met(int64_t step, const std::string& what, const std::string& when, const std::string& then) const;
  MembershipDecision lead();  // the leader's wait and decision
  void make_groups(const MembershipDecision& d);
  parallel::ReplicaRegroup layout(const MembershipDecision& d, const std::vector<int>& joined) const;
  std::vector<int> asking_replicas() const;  // lost replicas every rank of which asks to join
  std::string admit_joiners(int64_t step);  // the first rank: the admission text of this exchange ("" none)

  Runtime& rt_;
  const double timeout_s_, settle_s_;
  const int min_replicas_;
  const int64_t steps_;  // train.steps: no admission at the exchange after the last one
  int generation_ = 0;
  std::vector<Member> start_members_;  // every rank of the start
  std::vector<Member> members_;  // of the current generation
  int replica_ = 0;              // this rank's, numbered as at the start
  int64_t verdict_step_ = -1;    // the last exchange whose verdict this rank wrote (first rank)
  std::string verdict_;          // the verdict of the last exchange ("1", "0", "1 admit")
  std::optional<MembershipDecision> admission_;  // admitted, to take at the next step's start
  // The groups across replicas of generation > 0 (null before the first loss: rt_'s).
  std::unique_ptr<comm::ProcessGroup> world_, outer_;
  bool unsettled_ = false;  // unsettled()
  std::unique_ptr<Heartbeat> heartbeat_;  // this rank's beat (liveness.hpp), read by the first rank's waits
};

}  // namespace holmes::runtime
