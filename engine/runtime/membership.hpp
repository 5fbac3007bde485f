// Who goes on after a replica was lost (parallel.elastic, docs/elastic.md): the pure decision
// the leader of a broken generation writes to the store, from the members of that generation
// and the ranks that registered alive after the failure.
//
// Quorum rule: a replica goes on only whole (every rank of it registered, all at one step) and
// at the step most whole replicas stand at (ties: the group with the lowest-numbered replica,
// then the later step); a whole replica at another step (frozen, it woke in time to register)
// is apart and out. The job goes on when at least min_replicas replicas remain (any of them:
// the lowest rank that goes on leads the job, replica 0's or not); otherwise it stops, saying
// why. Ranks registered in a replica that is out are dropped: they exit saying why.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace holmes::runtime {

// A rank of a generation, named as at the job's start: its global rank and its replica.
struct Member {
  int rank = 0;
  int replica = 0;
};

// A rank alive after the failure: the step (0-based) it was in or had just finished.
struct Registration {
  int rank = 0;
  int64_t step = 0;
};

struct MembershipDecision {
  bool go_on = false;
  std::string reason;               // go_on false: why the job stops
  int64_t step = 0;                 // the step the survivors were in; the new layout starts after it
  // The number of the generation it makes (drawn from the store by whoever decides, so that a
  // loss and an admission decided from the same generation never share a name); 0: not drawn.
  int generation = 0;
  std::vector<int> replicas;        // whole replicas that go on, ascending (start numbering)
  std::vector<int> ranks;           // their ranks, ascending
  std::vector<int> lost_replicas;   // replicas that do not go on (not whole, or apart), ascending
  std::vector<int> apart_replicas;  // whole replicas at another step than those going on, ascending
  std::vector<int> missing_ranks;   // members that did not register, ascending
  std::vector<int> dropped_ranks;   // registered ranks of a lost replica (they exit)
};

// members: the generation's ranks (any order); registrations: one per rank that registered
// (a rank outside `members` is ignored). min_replicas >= 1.
MembershipDecision decide_membership(const std::vector<Member>& members, const std::vector<Registration>& registrations,
                                     int min_replicas);

// The decision as the store holds it, and back (std::runtime_error on a malformed text).
std::string encode_decision(const MembershipDecision& d);
MembershipDecision decode_decision(const std::string& text);

// "replica 1 (ranks 2, 3)": for log lines.
std::string describe_replicas(const std::vector<Member>& members, const std::vector<int>& replicas);

}  // namespace holmes::runtime
