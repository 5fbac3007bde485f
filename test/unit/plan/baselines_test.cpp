// The megatron and naive baselines (placement, partition, transports, estimate.baselines) and
// TCP groups of an RDMA island that would bind to Ethernet.
#include <catch2/catch.hpp>

#include <algorithm>

#include "engine/plan/plan.hpp"
#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
using holmes::topo::NicKind;

namespace {

// 2 IB + 2 RoCE nodes of 8 GPUs, interleaved (ib, roce, ib, roce) as a scheduler may list them.
holmes::topo::ClusterTopology interleaved() {
  return hp::testing::make_cluster({{NicKind::kIb, 2}, {NicKind::kRoce, 2}}, true);
}

hp::Plan plan_with(holmes::spec::JobSpec s, holmes::spec::Placement placement,
                   const holmes::topo::ClusterTopology& t) {
  s.parallel.placement = placement;
  return hp::make_plan(s, t);
}

// A CPU cluster of `nodes` one-worker nodes on one IB fabric; with_ipoib gives each an ib0.
holmes::topo::ClusterTopology cpu_ib_island(int nodes, bool with_ipoib) {
  auto t = hp::testing::make_cluster({{NicKind::kIb, nodes, 1}});
  for (auto& n : t.nodes) {
    n.devices.kind = "cpu";
    n.devices.cores = 4;
    if (!with_ipoib) continue;
    holmes::topo::Nic ib0;
    ib0.name = ib0.netdev = "ib0";
    ib0.kind = NicKind::kIpoib;
    ib0.active = true;
    ib0.rate_gbps = 100;
    n.nics.push_back(ib0);
  }
  return t;
}

const hp::Group& first_of(const hp::Plan& p, hp::GroupKind kind) {
  return *std::find_if(p.groups.begin(), p.groups.end(), [&](const hp::Group& g) { return g.kind == kind; });
}

}  // namespace

TEST_CASE("megatron: Megatron's order and uniform partition with every group between nodes on Ethernet",
          "[baselines]") {
  auto spec = hp::testing::make_spec(8, 256, 16, 8, 2, 2, 1, 16, 128);
  auto t = interleaved();
  hp::Plan m = plan_with(spec, holmes::spec::Placement::kMegatron, t), n = plan_with(spec, holmes::spec::Placement::kNaive, t);
  CHECK(m.placement == holmes::spec::Placement::kMegatron);
  CHECK(m.partition == holmes::spec::PartitionKind::kUniform);
  CHECK(n.partition == holmes::spec::PartitionKind::kUniform);  // auto means uniform for Megatron's placements
  for (size_t r = 0; r < m.ranks.size(); ++r) {
    CHECK(m.ranks[r].at[holmes::schedule::Axis::kTp] == n.ranks[r].at[holmes::schedule::Axis::kTp]);
    CHECK(m.ranks[r].at[holmes::schedule::Axis::kPp] == n.ranks[r].at[holmes::schedule::Axis::kPp]);
    CHECK(m.ranks[r].at[holmes::schedule::Axis::kDp] == n.ranks[r].at[holmes::schedule::Axis::kDp]);
  }
  int socket = 0;
  for (const auto& g : m.groups) {
    if (!g.crosses_nodes) continue;
    CHECK(g.transport == hp::Transport::kNcclSocket);
    CHECK(g.link == hp::LinkKind::kEthernet);
    CHECK(g.interface == "eth0");
    ++socket;
  }
  CHECK(socket > 0);
  // Interleaved: naive's pipeline groups stay on one island's RDMA fabric; megatron's do not.
  CHECK(first_of(n, hp::kPpGroup).transport == hp::Transport::kNcclIb);
  CHECK(m.estimate.step_time_s >= n.estimate.step_time_s);
}

TEST_CASE("every plan carries the megatron and naive baselines with the same degrees", "[baselines]") {
  auto spec = hp::testing::make_spec(8, 256, 16, 8, 2, 2, 1, 16, 128);
  auto t = interleaved();
  hp::Plan h = plan_with(spec, holmes::spec::Placement::kHolmes, t);
  REQUIRE(h.estimate.baselines.size() == 2);
  CHECK(h.estimate.baselines[0].placement == holmes::spec::Placement::kMegatron);
  CHECK(h.estimate.baselines[1].placement == holmes::spec::Placement::kNaive);
  CHECK(h.estimate.baselines[0].step_time_s == Approx(plan_with(spec, holmes::spec::Placement::kMegatron, t).estimate.step_time_s));
  CHECK(h.estimate.baselines[1].step_time_s == Approx(plan_with(spec, holmes::spec::Placement::kNaive, t).estimate.step_time_s));
  CHECK(h.estimate.naive_step_time_s == h.estimate.baselines[1].step_time_s);
  CHECK(h.estimate.baselines[0].step_time_s > h.estimate.step_time_s);
  const std::string json = hp::format_plan_json(h);
  CHECK(json.find("\"baselines\": {\"megatron\": {\"step_time_s\": ") != std::string::npos);
  CHECK(json.find("\"naive\": {\"step_time_s\": ") != std::string::npos);
  const std::string text = hp::format_plan_text(h);
  CHECK(text.find("vs megatron") != std::string::npos);
  CHECK(text.find("vs naive") != std::string::npos);
  // A megatron plan is its own megatron baseline.
  hp::Plan m = plan_with(spec, holmes::spec::Placement::kMegatron, t);
  CHECK(m.estimate.baselines[0].step_time_s == m.estimate.step_time_s);
}

TEST_CASE("a TCP group of an IB island without IPoIB is costed and printed as Ethernet, with a warning per node",
          "[baselines]") {
  auto spec = hp::testing::make_spec(4, 128, 4, 1, 1, 4, 1, 8, 64);
  spec.model.vocab_size = 257;
  hp::Plan with = hp::make_plan(spec, cpu_ib_island(4, true));
  const hp::Group& dp = first_of(with, hp::kDpGroup);
  CHECK(dp.transport == hp::Transport::kGlooTcp);
  CHECK(dp.link == hp::LinkKind::kIb);
  CHECK(dp.interface == "ib0");
  for (const auto& w : with.warnings) CHECK(w.find("IPoIB") == std::string::npos);

  hp::Plan without = hp::make_plan(spec, cpu_ib_island(4, false));
  const hp::Group& eth = first_of(without, hp::kDpGroup);
  CHECK(eth.link == hp::LinkKind::kEthernet);
  CHECK(eth.interface == "eth0");
  CHECK(without.estimate.step_time_s > with.estimate.step_time_s);
  int warned = 0;
  for (const auto& w : without.warnings)
    if (w.find("no IPoIB interface") != std::string::npos && w.find("kind: ipoib") != std::string::npos) ++warned;
  CHECK(warned == 4);  // one per node, each naming what to add
}
