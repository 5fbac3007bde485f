// The straggler detector: sequences of per-rank compute figures, one vector per log line, and
// who it names, since which step, by how much; blips, ranks without peers and missing figures.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/train/stragglers.hpp"

using namespace holmes;
using train::RankWork;
using train::Straggler;
using train::StragglerDetector;
using train::StragglerEvent;
using train::StragglerKind;

namespace {

// `n` ranks, rank r in peer class classes[r] (all 0 when empty) and replica replicas[r].
std::vector<RankWork> ranks_of(int n, std::vector<int> classes = {}, std::vector<int> replicas = {}) {
  std::vector<RankWork> out(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    out[static_cast<size_t>(r)].peer_class = classes.empty() ? 0 : classes[static_cast<size_t>(r)];
    out[static_cast<size_t>(r)].replica = replicas.empty() ? 0 : replicas[static_cast<size_t>(r)];
    out[static_cast<size_t>(r)].where = "node n" + std::to_string(r);
  }
  return out;
}

// Feeds lines of `interval` steps each; returns every event with the step of its line.
std::vector<std::pair<int64_t, StragglerEvent>> feed(StragglerDetector& d, const std::vector<std::vector<double>>& lines,
                                                     int64_t interval, int64_t start = 0) {
  std::vector<std::pair<int64_t, StragglerEvent>> out;
  int64_t through = start;
  for (const auto& line : lines) {
    through += interval;
    for (const StragglerEvent& e : d.observe(through, line)) out.emplace_back(through, e);
  }
  return out;
}

}  // namespace

TEST_CASE("stragglers: a rank persistently slower than its peers is named, since its first slow line, and recovers") {
  StragglerDetector d(ranks_of(4), {0.2, 3});
  const std::vector<double> even = {10, 10.5, 9.8, 10.2}, slow = {10, 10.5, 15, 10.2};
  // Lines 1-2 even, 3-8 rank 2 at 1.5x the median of {10, 10.5, 10.2} = 10.2, 9-11 even again.
  const auto events = feed(d, {even, even, slow, slow, slow, slow, slow, slow, even, even, even}, 10);
  REQUIRE(events.size() == 2);
  const auto& [named_at, named] = events[0];
  CHECK(named_at == 50);  // the third slow line
  CHECK_FALSE(named.recovered);
  CHECK(named.who.kind == StragglerKind::kRank);
  CHECK(named.who.id == 2);
  CHECK(named.who.since == 21);  // the first step of line 3
  CHECK(named.who.ratio == Approx(15 / 10.2));
  CHECK(named.who.peers == 3);
  const auto& [back_at, back] = events[1];
  CHECK(back_at == 110);  // the third line back under
  CHECK(back.recovered);
  CHECK(back.who.id == 2);
  CHECK(back.who.since == 21);
  CHECK(back.who.until == 110);
  CHECK(back.who.worst == Approx(15 / 10.2));
  CHECK(d.current().empty());
  REQUIRE(d.history().size() == 1);
  CHECK(d.history()[0].until == 110);
  CHECK(train::describe_straggler(d, named.who) == "rank 2 (node n2) 1.47x its 3 peers' compute since step 21");
  CHECK(train::describe_recovery(d, back.who) ==
        "rank 2 (node n2) back within 20% of its 3 peers' compute at step 110 (a straggler from step 21, at worst 1.47x)");
  CHECK(train::describe_spell(d, d.history()[0]) == "rank 2 (node n2) from step 21 to step 110, at worst 1.47x its 3 peers' compute");
}

TEST_CASE("stragglers: a blip is not named, slow lines must be consecutive") {
  StragglerDetector d(ranks_of(3), {0.2, 3});
  const std::vector<double> even = {10, 10, 10}, slow = {10, 30, 10};
  CHECK(feed(d, {slow, slow, even, slow, slow, even, slow, even, slow, slow}, 5).empty());
  CHECK(d.history().empty());
  // At the bound itself (1.2x) a rank is not slower.
  StragglerDetector e(ranks_of(3), {0.2, 1});
  CHECK(feed(e, {{10, 12, 10}, {10, 12, 10}}, 5).empty());
  CHECK(feed(e, {{10, 12.01, 10}}, 5).size() == 1);
}

TEST_CASE("stragglers: a named rank stays named through a short dip under the bound") {
  StragglerDetector d(ranks_of(3), {0.5, 2});
  const std::vector<double> even = {10, 10, 10}, slow = {10, 20, 10};
  const auto events = feed(d, {slow, slow, even, slow, even, slow, even, even, slow}, 1);
  REQUIRE(events.size() == 2);
  CHECK(events[0].first == 2);
  CHECK(events[1].first == 8);  // two lines under in a row: lines 7 and 8
  CHECK(events[1].second.recovered);
  CHECK(d.current().empty());  // line 9 starts a new run of slow lines, one is not enough
}

TEST_CASE("stragglers: a rank without peers is never compared") {
  // Two pipeline stages, one rank each: the second is 10x slower, but it has no peer.
  StragglerDetector d(ranks_of(2, {0, 1}), {0.2, 1});
  CHECK_FALSE(d.compares());
  CHECK(feed(d, {{10, 100}, {10, 100}, {10, 100}}, 1).empty());
  // Stage 0 with two data-parallel ranks, stage 1 with one: only stage 0's are compared.
  StragglerDetector e(ranks_of(3, {0, 1, 0}), {0.2, 1});
  CHECK(e.compares());
  const auto events = feed(e, {{10, 100, 13}}, 1);
  REQUIRE(events.size() == 1);
  CHECK(events[0].second.who.id == 2);
  CHECK(events[0].second.who.peers == 1);
  CHECK(events[0].second.who.ratio == Approx(1.3));
}

TEST_CASE("stragglers: a rank without a figure is neither compared nor a peer") {
  StragglerDetector d(ranks_of(3), {0.2, 1});
  // Rank 1 has no figure: rank 2 is compared with rank 0 alone (1.5x); rank 1 is not named.
  const auto events = feed(d, {{10, 0, 15}}, 1);
  REQUIRE(events.size() == 1);
  CHECK(events[0].second.who.id == 2);
  CHECK(events[0].second.who.peers == 1);
  // A line that does not compare a named rank leaves it named.
  CHECK(feed(d, {{10, 0, 0}, {10, NAN, 0}}, 1).empty());
  CHECK(d.current().size() == 1);
}

TEST_CASE("stragglers: the median of the peers, so one fast or slow peer does not name the others") {
  StragglerDetector d(ranks_of(5), {0.2, 1});
  // Rank 0 is 5x faster than the rest and rank 4 3x slower: only rank 4 is named (its peers'
  // median is 10, each other rank's peers' median stays 10 too).
  const auto events = feed(d, {{2, 10, 10, 10, 30}}, 1);
  REQUIRE(events.size() == 1);
  CHECK(events[0].second.who.id == 4);
  CHECK(events[0].second.who.ratio == Approx(3.0));
  // An even count of peers: the mean of the two middle values ({8, 10, 12, 13}: 11).
  StragglerDetector e(ranks_of(5), {0.2, 1});
  const auto two = feed(e, {{8, 10, 12, 13, 22}}, 1);
  REQUIRE(two.size() == 1);
  CHECK(two[0].second.who.ratio == Approx(2.0));
}

TEST_CASE("stragglers: a slower replica is named against the other replicas' mean compute") {
  // Three replicas of a two-stage pipeline: ranks 0-1 replica 0, 2-3 replica 1, 4-5 replica 2;
  // stage 1 computes twice what stage 0 does. Replica 1's ranks are 1.5x slower.
  StragglerDetector d(ranks_of(6, {0, 1, 0, 1, 0, 1}, {0, 0, 1, 1, 2, 2}), {0.2, 2}, /*start=*/100);
  CHECK(d.replicas() == 3);
  const std::vector<double> line = {10, 20, 15, 30, 10, 20};
  const auto events = feed(d, {line, line}, 20, /*start=*/100);
  REQUIRE(events.size() == 3);
  CHECK(events[0].second.who.kind == StragglerKind::kRank);
  CHECK(events[0].second.who.id == 2);
  CHECK(events[1].second.who.id == 3);
  const Straggler& replica = events[2].second.who;
  CHECK(replica.kind == StragglerKind::kReplica);
  CHECK(replica.id == 1);
  CHECK(replica.ratio == Approx(22.5 / 15));
  CHECK(replica.since == 101);  // the resumed run's first step
  CHECK(replica.peers == 2);
  CHECK(train::describe_straggler(d, replica) == "replica 1 (ranks 2, 3) 1.50x the other 2 replicas' mean compute since step 101");
  // A replica missing a rank's figure is not compared.
  StragglerDetector e(ranks_of(4, {0, 1, 0, 1}, {0, 0, 1, 1}), {0.2, 1});
  const auto partial = feed(e, {{10, 20, 0, 60}}, 1);
  REQUIRE(partial.size() == 1);
  CHECK(partial[0].second.who.kind == StragglerKind::kRank);
  CHECK(partial[0].second.who.id == 3);
}

TEST_CASE("stragglers: peers come from the plan: same coordinates but data-parallel rank and replica") {
  plan::Plan p;
  p.tp = 2, p.pp = 2, p.dp = 2;
  p.hostnames = {"a", "b"};
  p.replicas.count = 1;
  // Rank r: tp r % 2, pp r / 4, dp (r / 2) % 2; node r / 4.
  for (int r = 0; r < 8; ++r) {
    plan::RankInfo info;
    info.rank = r, info.node = r / 4, info.local_rank = r % 4;
    info.at[schedule::Axis::kTp] = r % 2, info.at[schedule::Axis::kPp] = r / 4, info.at[schedule::Axis::kDp] = (r / 2) % 2;
    p.ranks.push_back(info);
  }
  const std::vector<RankWork> w = train::rank_work_of(p);
  REQUIRE(w.size() == 8);
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      const bool same = a % 2 == b % 2 && a / 4 == b / 4;
      CHECK((w[a].peer_class == w[b].peer_class) == same);
    }
  CHECK(w[5].where == "node b, stage 1, tensor slice 1");
  CHECK(w[5].replica == 0);
}

TEST_CASE("stragglers: a bad rule or a wrong-sized line is a programming error") {
  CHECK_THROWS_AS(StragglerDetector(ranks_of(2), {0, 3}), std::invalid_argument);
  CHECK_THROWS_AS(StragglerDetector(ranks_of(2), {0.2, 0}), std::invalid_argument);
  StragglerDetector d(ranks_of(2), {0.2, 3});
  CHECK_THROWS_AS(d.observe(1, {1, 2, 3}), std::invalid_argument);
}
