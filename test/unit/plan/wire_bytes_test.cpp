// The bytes a plan says each class of link carries per step, against a count from first
// principles: the model's parameters by stage, the groups' rings and pairs as the plan lists
// them, and which of their hops leave a node. A group's link is its slowest hop (what prices
// its time), but its bytes go where its members are.
#include <catch2/catch.hpp>

#include "engine/plan/links.hpp"
#include "engine/plan/plan.hpp"
#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
using holmes::spec::Placement;
using holmes::topo::NicKind;

namespace {

constexpr int kEth = static_cast<int>(hp::LinkKind::kEthernet);
constexpr int kIntra = static_cast<int>(hp::LinkKind::kIntraNode);

// Three RDMA islands of one CPU node with two workers each, behind a 150 Mbit/s Ethernet: what
// the lab's generated scenario 5 emulates.
holmes::topo::ClusterTopology three_islands() {
  auto t = hp::testing::make_cluster({{NicKind::kIb, 1, 2, 1.5, 0.15, 0.05},
                                      {NicKind::kRoce, 1, 2, 3, 0.15, 0.0375},
                                      {NicKind::kIb, 1, 2, 1, 0.15, 0.05}});
  for (auto& n : t.nodes) n.devices.kind = "cpu", n.devices.cores = 1;
  return t;
}

// Its job: GPT-2 L=12 C=192 NH=4, V=257 (padded 384), T=64, fp32, pp 2 x dp 3 over 6 + 6
// layers, micro-batches of 2, 36 sequences a step.
holmes::spec::JobSpec gen5_job(Placement placement) {
  auto spec = hp::testing::make_spec(12, 192, 4, 1, 2, 3, 2, 36, 64);
  spec.model.vocab_size = 257;
  spec.parallel.partition.kind = holmes::spec::PartitionKind::kList;
  spec.parallel.partition.layers = {6, 6};
  spec.parallel.placement = placement;
  return spec;
}

}  // namespace

TEST_CASE("a data-parallel ring with two members on one node sends a third of its bytes inside the node",
          "[cost_model][wire]") {
  const auto topo = three_islands();
  // Parameters by stage: a block 12 C^2 + 13 C = 444,864; stage 0 adds the token and position
  // embeddings (384 + 64) C, stage 1 the final LayerNorm 2 C and its copy of the tied head 384 C.
  const double block = 12.0 * 192 * 192 + 13 * 192;
  const double stage_params[2] = {6 * block + (384 + 64) * 192, 6 * block + 2 * 192 + 384 * 192};
  const double m = 36 / (2 * 3);               // micro-batches per pipeline
  const double act = 2.0 * 64 * 192 * 4;       // a (B, T, C) fp32 boundary tensor
  const double tied = 384.0 * 192 * 4;         // the tied embedding's fp32 gradient
  for (Placement placement : {Placement::kHolmes, Placement::kMegatron, Placement::kNaive}) {
    INFO("placement " << holmes::spec::to_string(placement));
    const hp::Plan plan = hp::make_plan(gen5_job(placement), topo);
    REQUIRE(plan.pp == 2);
    REQUIRE(plan.dp == 3);
    auto node = [&](int rank) { return plan.ranks.at(rank).node; };
    double ethernet = 0, intra = 0;
    int split_rings = 0;
    for (const hp::Group& g : plan.groups) {
      const int d = static_cast<int>(g.ranks.size());
      if (d < 2) continue;
      if (g.kind == hp::kDpGroup) {
        // A ring (Gloo's, in group-rank order): every member sends (d-1)/d of its stage's
        // parameters twice, fp32 gradients reduce-scattered and fp32 weights all-gathered, to
        // the next member.
        const int stage = plan.ranks.at(g.ranks[0]).at[holmes::schedule::Axis::kPp];
        const double per_member = (d - 1.0) / d * stage_params[stage] * (4 + 4);
        int crossing = 0;
        for (int i = 0; i < d; ++i) crossing += node(g.ranks[i]) != node(g.ranks[(i + 1) % d]);
        split_rings += crossing > 0 && crossing < d;
        ethernet += crossing * per_member;
        intra += (d - crossing) * per_member;
      } else if (g.kind == hp::kPpGroup || g.kind == hp::kEmbeddingGroup) {
        // Two members, each sending to the other: every micro-batch's activation forward and
        // its gradient back, or the tied embedding's sum.
        REQUIRE(d == 2);
        const double both = g.kind == hp::kPpGroup ? 2 * m * act : 2 * tied;
        (node(g.ranks[0]) != node(g.ranks[1]) ? ethernet : intra) += both;
      }
    }
    // Six ranks on three nodes: some ring of three has two members on one node.
    CHECK(split_rings > 0);
    CHECK(plan.estimate.bytes_per_step[kEth] == Approx(ethernet).epsilon(1e-9));
    CHECK(plan.estimate.bytes_per_step[kIntra] == Approx(intra).epsilon(1e-9));
  }
}

TEST_CASE("gen-5's layout: each data-parallel ring leaves its members' nodes on two of its three hops",
          "[cost_model][wire]") {
  // The layout the lab ran in its holmes, megatron and naive cases (ranks 0 1 | 2 3 | 4 5 on
  // the three nodes, stage 0 on ranks 0-2; naive: the nodes as listed): the rings are A A B and B C C. Per step on the Ethernet: 2/3 of the two rings' 16 P
  // (3 members x 2/3 P x 8 bytes), the three pipelines' 12 boundary tensors and the three tied
  // sums of 2 x 384 C fp32: 63,959,040 bytes (all of the rings' bytes would be 93.3 MB).
  const hp::Plan plan = hp::make_plan(gen5_job(Placement::kNaive), three_islands());
  std::vector<int> nodes;
  for (const auto& r : plan.ranks) nodes.push_back(r.node);
  REQUIRE(nodes == std::vector<int>{0, 0, 1, 1, 2, 2});
  for (const hp::Group& g : plan.groups)
    if (g.kind == hp::kDpGroup) REQUIRE((g.ranks == std::vector<int>{0, 1, 2} || g.ranks == std::vector<int>{3, 4, 5}));
  CHECK(plan.estimate.bytes_per_step[kEth] == Approx(63959040.0).epsilon(1e-9));
}

TEST_CASE("a ring's bytes by link class: Gloo's in group-rank order, NCCL's a node's members together",
          "[cost_model][wire]") {
  // Two IB nodes of one island; a ring of four dealt over them (A B A B).
  auto t = hp::testing::make_cluster({{NicKind::kIb, 2, 2, 100, 25}});
  const hp::Facts nccl = hp::collect_facts(hp::testing::make_spec(8, 256, 4, 1, 1, 4, 1, 16, 64), t);
  REQUIRE_FALSE(nccl.tcp_groups);
  const int ib = static_cast<int>(hp::LinkKind::kIb);
  // NCCL's ring A A B B: two of its four hops leave a node.
  hp::LinkShares s = hp::ring_shares(nccl, {0, 1, 0, 1});
  CHECK(s[ib] == Approx(0.5));
  CHECK(s[kIntra] == Approx(0.5));
  // Gloo's ring goes member to member: every hop leaves its node (over Ethernet: these nodes
  // have no TCP interface on the island).
  hp::Facts gloo = nccl;
  gloo.tcp_groups = true;
  s = hp::ring_shares(gloo, {0, 1, 0, 1});
  CHECK(s[kEth] == Approx(1.0));
  CHECK(s[kIntra] == 0);
  // In node order both leave each node once; one member sends nothing.
  CHECK(hp::ring_shares(gloo, {0, 0, 1, 1})[kEth] == Approx(0.5));
  const hp::LinkShares none = hp::ring_shares(gloo, {0});
  CHECK(none[kEth] + none[kIntra] == 0);
}

TEST_CASE("an exchange of every member with every other: each ordered pair's bytes on its own link",
          "[cost_model][wire]") {
  // The outer sync's owner-slice exchange. Four members on two IB nodes of one island (A A B B):
  // of the 12 ordered pairs, 4 stay inside a node; the other 8 leave it, on the island's RDMA
  // where NCCL runs the group and on Ethernet where Gloo does (no TCP interface on the island).
  auto t = hp::testing::make_cluster({{NicKind::kIb, 2, 2, 100, 25}});
  hp::Facts f = hp::collect_facts(hp::testing::make_spec(8, 256, 4, 1, 1, 4, 1, 16, 64), t);
  const int ib = static_cast<int>(hp::LinkKind::kIb);
  hp::LinkShares s = hp::pair_shares(f, {0, 0, 1, 1});
  CHECK(s[kIntra] == Approx(1.0 / 3));
  CHECK(s[ib] == Approx(2.0 / 3));
  f.tcp_groups = true;
  s = hp::pair_shares(f, {0, 0, 1, 1});
  CHECK(s[kIntra] == Approx(1.0 / 3));
  CHECK(s[kEth] == Approx(2.0 / 3));
  // Two members on one node exchange inside it; one member sends nothing.
  CHECK(hp::pair_shares(f, {1, 1})[kIntra] == Approx(1.0));
  const hp::LinkShares none = hp::pair_shares(f, {0});
  CHECK(none[kEth] + none[kIntra] + none[ib] == 0);
}
