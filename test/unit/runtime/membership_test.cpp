// The membership decision of an elastic job (engine/runtime/membership.hpp): the quorum rule
// on named cases, against a brute force over every set of registrations of a 3 x 2 job, and
// the store text's round trip.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/runtime/membership.hpp"

using namespace holmes::runtime;

namespace {

// replicas x per: rank r is in replica r / per (the plan's replica-major rank order).
std::vector<Member> job(int replicas, int per) {
  std::vector<Member> out;
  for (int r = 0; r < replicas * per; ++r) out.push_back({r, r / per});
  return out;
}

std::vector<Registration> alive(const std::vector<int>& ranks, int64_t step = 7) {
  std::vector<Registration> out;
  for (int r : ranks) out.push_back({r, step});
  return out;
}

}  // namespace

TEST_CASE("membership: a dead rank takes its replica out, the others go on from the same step") {
  const MembershipDecision d = decide_membership(job(3, 1), alive({0, 2}), 1);
  CHECK(d.go_on);
  CHECK(d.replicas == std::vector<int>{0, 2});
  CHECK(d.ranks == std::vector<int>{0, 2});
  CHECK(d.lost_replicas == std::vector<int>{1});
  CHECK(d.missing_ranks == std::vector<int>{1});
  CHECK(d.dropped_ranks.empty());
  CHECK(d.step == 7);
}

TEST_CASE("membership: a replica missing one of its ranks is out, its other ranks dropped") {
  const MembershipDecision d = decide_membership(job(3, 2), alive({0, 1, 2, 4, 5}), 2);
  CHECK(d.go_on);
  CHECK(d.replicas == std::vector<int>{0, 2});
  CHECK(d.ranks == std::vector<int>{0, 1, 4, 5});
  CHECK(d.missing_ranks == std::vector<int>{3});
  CHECK(d.dropped_ranks == std::vector<int>{2});
}

TEST_CASE("membership: a whole replica at another step than most is apart and out, the others go on") {
  // Replica 2 was frozen at step 965 and woke in time to register; the others wait at 979.
  const std::vector<Registration> regs = {{0, 979}, {1, 979}, {2, 965}, {3, 979}};
  const MembershipDecision d = decide_membership(job(4, 1), regs, 1);
  CHECK(d.go_on);
  CHECK(d.step == 979);
  CHECK(d.replicas == std::vector<int>{0, 1, 3});
  CHECK(d.apart_replicas == std::vector<int>{2});
  CHECK(d.lost_replicas == std::vector<int>{2});
  CHECK(d.dropped_ranks == std::vector<int>{2});
  CHECK(d.missing_ranks.empty());
  // A tie goes to the step of the lowest replica; a replica whose ranks disagree is not whole.
  const MembershipDecision tie = decide_membership(job(4, 1), {{0, 5}, {1, 5}, {2, 6}, {3, 6}}, 1);
  CHECK(tie.replicas == std::vector<int>{0, 1});
  CHECK(tie.step == 5);
  const MembershipDecision tie_without_0 = decide_membership(job(5, 1), {{1, 7}, {2, 6}, {3, 6}, {4, 7}}, 1);
  CHECK(tie_without_0.replicas == std::vector<int>{1, 4});
  CHECK(tie_without_0.step == 7);
  CHECK(tie_without_0.apart_replicas == std::vector<int>{2, 3});
  const MembershipDecision split = decide_membership(job(2, 2), {{0, 5}, {1, 5}, {2, 5}, {3, 6}}, 1);
  CHECK(split.replicas == std::vector<int>{0});
  CHECK(split.lost_replicas == std::vector<int>{1});
  CHECK(split.apart_replicas.empty());
}

TEST_CASE("membership: below min_replicas or with no whole replica the job stops, without replica 0 it goes on") {
  const MembershipDecision few = decide_membership(job(3, 1), alive({0, 2}), 3);
  CHECK_FALSE(few.go_on);
  CHECK(few.reason.find("parallel.min_replicas is 3") != std::string::npos);
  const MembershipDecision no_zero = decide_membership(job(3, 1), alive({1, 2}), 2);
  CHECK(no_zero.go_on);
  CHECK(no_zero.replicas == std::vector<int>{1, 2});
  CHECK(no_zero.lost_replicas == std::vector<int>{0});
  const MembershipDecision none = decide_membership(job(2, 2), alive({1, 2}), 1);
  CHECK_FALSE(none.go_on);
  CHECK(none.reason.find("only 0 whole replica(s)") != std::string::npos);
  // A registration of a rank outside the generation (a stale one) counts for nothing.
  const MembershipDecision stale = decide_membership(job(2, 1), alive({0, 1, 9}), 2);
  CHECK(stale.go_on);
  CHECK(stale.ranks == std::vector<int>{0, 1});
}

TEST_CASE("membership: every set of registrations of a 3 x 2 job matches the rule checked rank by rank") {
  const std::vector<Member> members = job(3, 2);
  for (int mask = 0; mask < 64; ++mask) {
    std::vector<int> in;
    for (int r = 0; r < 6; ++r)
      if (mask & (1 << r)) in.push_back(r);
    for (int min_replicas = 1; min_replicas <= 3; ++min_replicas) {
      const MembershipDecision d = decide_membership(members, alive(in), min_replicas);
      INFO("registered mask " << mask << ", min_replicas " << min_replicas);
      std::vector<int> whole, ranks, lost, missing, dropped;
      for (int replica = 0; replica < 3; ++replica) {
        const bool a = mask & (1 << (2 * replica)), b = mask & (1 << (2 * replica + 1));
        if (a && b) {
          whole.push_back(replica);
          ranks.push_back(2 * replica);
          ranks.push_back(2 * replica + 1);
        } else {
          lost.push_back(replica);
          if (a) dropped.push_back(2 * replica);
          if (b) dropped.push_back(2 * replica + 1);
        }
        if (!a) missing.push_back(2 * replica);
        if (!b) missing.push_back(2 * replica + 1);
      }
      CHECK(d.replicas == whole);
      CHECK(d.ranks == ranks);
      CHECK(d.lost_replicas == lost);
      CHECK(d.missing_ranks == missing);
      CHECK(d.dropped_ranks == dropped);
      const bool go_on = static_cast<int>(whole.size()) >= min_replicas;
      CHECK(d.go_on == go_on);
      CHECK(d.reason.empty() == go_on);
    }
  }
}

TEST_CASE("membership: the decision survives the store's text") {
  MembershipDecision d = decide_membership(job(4, 2), alive({0, 1, 3, 4, 5, 6, 7}, 41), 2);
  d.generation = 3;
  const MembershipDecision back = decode_decision(encode_decision(d));
  CHECK(back.go_on == d.go_on);
  CHECK(back.step == 41);
  CHECK(back.generation == 3);
  CHECK(back.replicas == d.replicas);
  CHECK(back.ranks == d.ranks);
  CHECK(back.lost_replicas == d.lost_replicas);
  CHECK(back.apart_replicas == d.apart_replicas);
  CHECK(back.missing_ranks == d.missing_ranks);
  CHECK(back.dropped_ranks == d.dropped_ranks);
  const MembershipDecision stop = decide_membership(job(3, 1), alive({1, 2}), 1);
  CHECK(decode_decision(encode_decision(stop)).reason == stop.reason);
  CHECK_THROWS_WITH(decode_decision("go_on 1\n"), Catch::Contains("without 'step'"));
  CHECK(describe_replicas(job(3, 2), {1, 2}) == "replica 1 (ranks 2, 3), replica 2 (ranks 4, 5)");
}
