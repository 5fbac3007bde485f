// Placement invariants over many generated clusters.
#include <catch2/catch.hpp>

#include <array>
#include <map>
#include <random>
#include <set>

#include "engine/plan/plan.hpp"
#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
using hp::testing::IslandSpec;

namespace {

void check_invariants(const hp::Plan& p, const holmes::topo::ClusterTopology& t, bool perfect) {
  INFO("tp " << p.tp << " pp " << p.pp << " dp " << p.dp << " nodes " << t.nodes.size());
  REQUIRE(static_cast<int>(p.ranks.size()) == p.world);
  REQUIRE(p.tp * p.pp * p.dp == p.world);
  // Each rank in exactly one group of each kind; groups have the right size and agree with
  // the rank coordinates.
  std::map<hp::GroupKind, std::vector<int>> seen;
  for (auto k : {hp::kTpGroup, hp::kPpGroup, hp::kDpGroup, hp::kEmbeddingGroup,
                 hp::kWorldGroup})
    seen[k].assign(p.world, 0);
  for (const auto& g : p.groups) {
    for (int r : g.ranks) seen[g.kind][r]++;
    const auto& r0 = p.ranks[g.ranks[0]];
    for (size_t i = 0; i < g.ranks.size(); ++i) {
      const auto& r = p.ranks[g.ranks[i]];
      if (g.kind == hp::kTpGroup) REQUIRE((r.at[holmes::schedule::Axis::kPp] == r0.at[holmes::schedule::Axis::kPp] && r.at[holmes::schedule::Axis::kDp] == r0.at[holmes::schedule::Axis::kDp] && r.at[holmes::schedule::Axis::kTp] == int(i)));
      if (g.kind == hp::kDpGroup) REQUIRE((r.at[holmes::schedule::Axis::kPp] == r0.at[holmes::schedule::Axis::kPp] && r.at[holmes::schedule::Axis::kTp] == r0.at[holmes::schedule::Axis::kTp] && r.at[holmes::schedule::Axis::kDp] == int(i)));
      if (g.kind == hp::kPpGroup) REQUIRE((r.at[holmes::schedule::Axis::kTp] == r0.at[holmes::schedule::Axis::kTp] && r.at[holmes::schedule::Axis::kDp] == r0.at[holmes::schedule::Axis::kDp] && r.at[holmes::schedule::Axis::kPp] == int(i)));
      // A hop of one pipeline, the lower stage first, between two nodes of one island.
      if (g.kind == hp::kHopGroup)
        REQUIRE((g.ranks.size() == 2 && r.at[holmes::schedule::Axis::kTp] == r0.at[holmes::schedule::Axis::kTp] && r.at[holmes::schedule::Axis::kDp] == r0.at[holmes::schedule::Axis::kDp] && r.at[holmes::schedule::Axis::kPp] == r0.at[holmes::schedule::Axis::kPp] + int(i) &&
                 r.node != r0.node && t.island_of[r.node] == t.island_of[r0.node]));
    }
    if (perfect && (g.kind == hp::kTpGroup || g.kind == hp::kDpGroup)) REQUIRE_FALSE(g.crosses_islands);
    if (perfect && g.kind == hp::kTpGroup) REQUIRE_FALSE(g.crosses_nodes);
  }
  for (int r = 0; r < p.world; ++r) {
    REQUIRE(seen[hp::kTpGroup][r] == 1);
    REQUIRE(seen[hp::kPpGroup][r] == 1);
    REQUIRE(seen[hp::kDpGroup][r] == 1);
    REQUIRE(seen[hp::kWorldGroup][r] == 1);
    bool end_stage = p.pp > 1 && (p.ranks[r].at[holmes::schedule::Axis::kPp] == 0 || p.ranks[r].at[holmes::schedule::Axis::kPp] == p.pp - 1);
    REQUIRE(seen[hp::kEmbeddingGroup][r] == (end_stage ? 1 : 0));
  }
  // Partition: sums to the layers, no empty stage, contiguous.
  int next = 0;
  for (const auto& s : p.stages) {
    REQUIRE(s.num_layers >= 1);
    REQUIRE(s.first_layer == next);
    next += s.num_layers;
  }
  if (!perfect) return;
  // Every stage inside one island, and the pipeline crosses islands as few times as it can.
  std::set<int> used;
  int crossings = 0;
  for (const auto& s : p.stages) {
    REQUIRE_FALSE(s.straddles);
    used.insert(s.island);
    if (s.stage > 0 && p.stages[s.stage - 1].island != s.island) ++crossings;
  }
  for (const auto& r : p.ranks) REQUIRE(t.island_of[r.node] == p.stages[r.at[holmes::schedule::Axis::kPp]].island);
  REQUIRE(crossings == static_cast<int>(used.size()) - 1);
}

}  // namespace

TEST_CASE("holmes placement invariants on generated clusters", "[placement]") {
  std::mt19937 rng(20240613);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const holmes::topo::NicKind kinds[] = {holmes::topo::NicKind::kIb, holmes::topo::NicKind::kRoce,
                                         holmes::topo::NicKind::kEthernet};
  int perfect_cases = 0;
  for (int iter = 0; iter < 300; ++iter) {
    int devices = std::vector<int>{1, 2, 4, 8}[pick(0, 3)];
    std::vector<IslandSpec> islands(pick(1, 4));
    for (auto& is : islands) {
      is.kind = kinds[pick(0, 2)];
      is.nodes = is.kind == holmes::topo::NicKind::kEthernet ? 1 : pick(1, 6);
      is.devices = devices;
      is.rdma_gbps = 100.0 * pick(1, 4);
    }
    auto topo = hp::testing::make_cluster(islands, pick(0, 1) == 1);
    int world = 0;
    for (auto& n : topo.nodes) world += n.devices.count;
    // Random degrees with tp inside a node and pp <= layers.
    auto [tp, pp, dp] = hp::testing::random_degrees(rng, devices, world, 32);
    auto spec = hp::testing::make_spec(32, 256, 16, tp, pp, dp, 1, dp * pick(1, 4), 128);
    using K = holmes::spec::PartitionKind;
    spec.parallel.partition.kind = std::vector<K>{K::kAuto, K::kUniform}[pick(0, 1)];
    hp::Plan p = hp::make_plan(spec, topo);
    bool perfect = hp::testing::perfect_layout_exists(topo, tp, dp);
    perfect_cases += perfect;
    check_invariants(p, topo, perfect);
  }
  CHECK(perfect_cases > 50);  // the generator must exercise the interesting case
}

TEST_CASE("naive placement is Megatron's order over nodes as given", "[placement]") {
  auto topo = hp::testing::make_cluster({{holmes::topo::NicKind::kIb, 2}, {holmes::topo::NicKind::kRoce, 2}}, true);
  // 32 layers of 1024 (the stages' gradients outweigh the tied embedding) on interleaved
  // islands: naive's data-parallel rings cross Ethernet every step, holmes keeps them on the
  // islands' fabrics and sends only the pipeline's activations and the embedding's gradient
  // across, so its step is priced below naive's.
  auto spec = hp::testing::make_spec(32, 1024, 16, 2, 2, 8, 1, 16, 128);
  spec.parallel.placement = holmes::spec::Placement::kNaive;
  hp::Plan p = hp::make_plan(spec, topo);
  for (const auto& r : p.ranks) REQUIRE(r.rank == r.at[holmes::schedule::Axis::kTp] + 2 * (r.at[holmes::schedule::Axis::kDp] + 8 * r.at[holmes::schedule::Axis::kPp]));
  // Interleaved islands: naive data groups cross islands, holmes's do not.
  int crossing = 0;
  for (const auto& g : p.groups) crossing += g.kind == hp::kDpGroup && g.crosses_islands;
  CHECK(crossing > 0);
  spec.parallel.placement = holmes::spec::Placement::kHolmes;
  hp::Plan h = hp::make_plan(spec, topo);
  for (const auto& g : h.groups)
    if (g.kind == hp::kDpGroup) CHECK_FALSE(g.crosses_islands);
  CHECK(h.estimate.naive_step_time_s == Approx(hp::make_plan([&] {
                                                 auto s = spec;
                                                 s.parallel.placement = holmes::spec::Placement::kNaive;
                                                 s.parallel.partition.kind = holmes::spec::PartitionKind::kUniform;
                                                 return s;
                                               }(), topo).estimate.step_time_s));
  CHECK(h.estimate.step_time_s < h.estimate.naive_step_time_s);
}

TEST_CASE("unequal islands: the least bad layout names the crossing groups", "[placement]") {
  // 3 + 5 nodes of 8, tp 8, dp 4: a stage needs 4 nodes, island 0 has only 3.
  auto topo = hp::testing::make_cluster({{holmes::topo::NicKind::kIb, 3}, {holmes::topo::NicKind::kRoce, 5}});
  auto spec = hp::testing::make_spec(8, 256, 16, 8, 2, 4, 1, 16, 128);
  hp::Plan p = hp::make_plan(spec, topo);
  int crossing = 0;
  for (const auto& g : p.groups) crossing += g.kind == hp::kDpGroup && g.crosses_islands;
  CHECK(crossing == 8);  // every tensor slice of the one straddling stage
  bool named = false;
  for (const auto& w : p.warnings) named |= w.find("dp group") != std::string::npos && w.find("islands") != std::string::npos;
  CHECK(named);
  for (const auto& g : p.groups)
    if (g.kind == hp::kTpGroup) CHECK_FALSE(g.crosses_nodes);
}

TEST_CASE("transports: RDMA inside an island, sockets across, intra-node in a node", "[placement]") {
  auto topo = hp::testing::make_cluster({{holmes::topo::NicKind::kIb, 2}, {holmes::topo::NicKind::kRoce, 2}});
  auto spec = hp::testing::make_spec(8, 256, 16, 8, 2, 2, 1, 16, 128);
  hp::Plan p = hp::make_plan(spec, topo);
  for (const auto& g : p.groups) {
    if (g.kind == hp::kTpGroup) CHECK(g.transport == hp::Transport::kIntraNode);
    if (g.kind == hp::kPpGroup) {
      CHECK(g.transport == hp::Transport::kNcclSocket);
      CHECK(g.interface == "eth0");
    }
    if (g.kind == hp::kDpGroup) {
      bool ib = p.stages[p.ranks[g.ranks[0]].at[holmes::schedule::Axis::kPp]].island == 0;
      CHECK(g.transport == (ib ? hp::Transport::kNcclIb : hp::Transport::kNcclRoce));
      CHECK(g.hcas == std::vector<std::string>{"mlx5_0:1"});
      CHECK(g.gid_index == (ib ? -1 : 3));
    }
  }
}

TEST_CASE("CPU jobs use Gloo on the interface the topology picks, HCAs follow the island's fabric", "[placement]") {
  auto topo = hp::testing::make_cluster({{holmes::topo::NicKind::kIb, 2, 1}, {holmes::topo::NicKind::kIb, 1, 1}});
  for (auto& n : topo.nodes) {
    n.devices.kind = "cpu";
    holmes::topo::Nic ipoib;
    ipoib.name = "ib0";
    ipoib.kind = holmes::topo::NicKind::kIpoib;
    ipoib.active = true;
    ipoib.addresses = {"10.9.0.1/16"};
    n.nics.push_back(ipoib);
    n.nics[0].addresses = {"192.168.0.1/24"};  // eth0
    holmes::topo::Nic other = n.nics[1];  // an IB port on a fabric no other node has
    other.name = "mlx5_9";
    other.fabric = "elsewhere";
    n.nics.push_back(other);
  }
  for (int i = 0; i < 2; ++i) topo.islands[i].fabric = "fabric-" + std::to_string(i);
  auto spec = hp::testing::make_spec(4, 64, 4, 1, 1, 3, 1, 3, 32);
  hp::Plan p = hp::make_plan(spec, topo);
  CHECK(p.device_kind == "cpu");
  for (const auto& g : p.groups) {
    CHECK(g.transport == hp::Transport::kGlooTcp);
    CHECK(g.hcas.empty());
    if (g.kind == hp::kDpGroup) {
      CHECK(g.crosses_islands);
      CHECK(g.interface == "eth0");  // leaves the island: the Ethernet port, not IPoIB
    }
  }
  // Inside one IB island, CPU ranks talk over IPoIB; GPU ranks get only the island's ports.
  auto two = topo;
  two.nodes.pop_back();
  two.island_of.pop_back();
  two.islands.pop_back();
  spec.parallel.data = 2;
  spec.train.global_batch = 2;
  for (const auto& g : hp::make_plan(spec, two).groups)
    if (g.kind == hp::kDpGroup) CHECK(g.interface == "ib0");
  for (auto& n : two.nodes) n.devices.kind = "cuda";
  for (const auto& g : hp::make_plan(spec, two).groups)
    if (g.kind == hp::kDpGroup) {
      CHECK(g.transport == hp::Transport::kNcclIb);
      CHECK(g.hcas == std::vector<std::string>{"mlx5_0:1"});
    }
}
