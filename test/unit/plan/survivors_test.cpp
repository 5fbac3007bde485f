// The plan of a job that lost nodes (engine/plan/survivors.hpp): the cluster without them, and
// the same job searched again on what is left, or the reason it cannot go on.
#include "engine/plan/survivors.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <stdexcept>

#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
using holmes::topo::NicKind;

namespace {

// Three islands of two nodes of 8 devices: one pipeline across them (Holmes's layout).
holmes::topo::ClusterTopology three_islands() {
  return hp::testing::make_cluster({{NicKind::kIb, 2}, {NicKind::kRoce, 2}, {NicKind::kEthernet, 2}});
}

// Every layer of the model on exactly one stage of the plan.
void check_layers_once(const hp::Plan& p, int layers) {
  std::vector<int> held(layers, 0);
  for (const auto& s : p.stages)
    for (int l = s.first_layer; l < s.first_layer + s.num_layers; ++l) held.at(l) += 1;
  for (int l = 0; l < layers; ++l) CHECK(held[l] == 1);
}

}  // namespace

TEST_CASE("without_nodes renumbers nodes and islands densely and drops emptied islands", "[survivors]") {
  const auto t = three_islands();
  const auto s = hp::without_nodes(t, {3, 2, 3, 4});  // island 1 whole, one node of island 2
  REQUIRE(s.nodes.size() == 2 + 1);
  CHECK(s.nodes[0].hostname == t.nodes[0].hostname);
  CHECK(s.nodes[1].hostname == t.nodes[1].hostname);
  CHECK(s.nodes[2].hostname == t.nodes[5].hostname);
  REQUIRE(s.islands.size() == 2);
  CHECK(s.islands[0].kind == NicKind::kIb);
  CHECK(s.islands[0].nodes == std::vector<int>{0, 1});
  CHECK(s.islands[1].kind == NicKind::kEthernet);
  CHECK(s.islands[1].id == 1);
  CHECK(s.islands[1].nodes == std::vector<int>{2});
  CHECK(s.island_of == std::vector<int>{0, 0, 1});
  CHECK_THROWS_AS(hp::without_nodes(t, {6}), std::invalid_argument);
}

TEST_CASE("without_nodes drops the warnings about a lost node and keeps the others", "[survivors]") {
  auto t = three_islands();
  const std::string host5 = t.nodes[5].hostname;
  t.warnings = {"node '" + host5 + "': no active physical Ethernet port reports its speed; assumed 10 Gb/s",
                "node '" + t.nodes[0].hostname + "': no active physical Ethernet port reports its speed",
                "nodes have different device models"};
  const auto s = hp::without_nodes(t, {5});
  CHECK(s.warnings == std::vector<std::string>{t.warnings[1], t.warnings[2]});
  CHECK(hp::without_nodes(t, {}).warnings == t.warnings);
}

TEST_CASE("a pipeline across three islands that loses a node is planned again on the other five", "[survivors]") {
  const auto t = three_islands();
  // 48 layers of 2048, tensor 8 inside a node, 6 stages of one node each, global batch 48.
  auto spec = hp::testing::make_spec(48, 2048, 16, 8, 6, 1, 1, 48, 2048);
  const hp::Plan before = hp::make_plan(spec, t);
  REQUIRE(before.world == 48);
  for (int lost : {0, 3, 5}) {
    const hp::SurvivorPlan s = hp::plan_on_survivors(spec, t, {lost});
    INFO("lost node " << lost << ": " << s.why);
    REQUIRE(s.fits);
    CHECK(s.plan.world == 40);
    CHECK(s.spec.parallel.tensor == 8);  // still divides every node's devices: kept
    CHECK(s.spec.train.global_batch == spec.train.global_batch);
    CHECK(s.spec.model.layers == spec.model.layers);
    check_layers_once(s.plan, 48);
    std::set<std::string> hosts;
    for (int node = 0; node < static_cast<int>(s.topology.nodes.size()); ++node) {
      hosts.insert(s.topology.nodes[node].hostname);
      CHECK(s.topology.nodes[node].hostname == t.nodes[s.old_node.at(node)].hostname);
    }
    CHECK_FALSE(hosts.count(t.nodes[lost].hostname));
    // The new plan's degrees make its world and split the same batch.
    CHECK(s.plan.tp * s.plan.pp * s.plan.dp == 40);
    CHECK(s.plan.global_batch == spec.train.global_batch);
  }
}

TEST_CASE("a tensor degree a surviving node cannot hold is searched again", "[survivors]") {
  // Nodes of 8 devices and one of 4: losing an 8-device node leaves a cluster where tensor 8
  // no longer divides every node.
  auto t = hp::testing::make_cluster({{NicKind::kIb, 2, 8}, {NicKind::kRoce, 1, 8}, {NicKind::kRoce, 1, 4}});
  auto spec = hp::testing::make_spec(24, 1024, 16, 4, 0, 0, 1, 56, 1024);
  const hp::SurvivorPlan s = hp::plan_on_survivors(spec, t, {0});
  INFO(s.why);
  REQUIRE(s.fits);
  CHECK(s.plan.world == 20);
  CHECK(s.spec.parallel.tensor == 4);  // 4 divides 8 and 4: kept
  spec.parallel.tensor = 8;
  spec.parallel.data = 0;
  const hp::SurvivorPlan s8 = hp::plan_on_survivors(spec, t, {0});
  INFO(s8.why);
  REQUIRE(s8.fits);
  CHECK(s8.spec.parallel.tensor == 0);  // searched again
  CHECK(s8.plan.tp <= 4);
}

TEST_CASE("survivors that cannot hold the model say so with the devices left", "[survivors]") {
  auto t = three_islands();
  for (auto& node : t.nodes) node.devices.memory_gb = 8;  // a model that needs most of the cluster
  auto spec = hp::testing::make_spec(48, 4096, 32, 8, 6, 1, 1, 48, 1024);
  const hp::SurvivorPlan all = hp::plan_on_survivors(spec, t, {});
  INFO(all.why);
  REQUIRE(all.fits);
  const hp::SurvivorPlan s = hp::plan_on_survivors(spec, t, {1, 2, 4, 5});
  CHECK_FALSE(s.fits);
  INFO(s.why);
  CHECK_THAT(s.why, Catch::Contains("16 device(s) on 2 node(s) left"));
  CHECK_THAT(s.why, Catch::Contains("memory"));
  const hp::SurvivorPlan none = hp::plan_on_survivors(spec, t, {0, 1, 2, 3, 4, 5});
  CHECK_FALSE(none.fits);
  CHECK_THAT(none.why, Catch::Contains("no node survived"));
}

TEST_CASE("a job of replicas is not re-planned node by node", "[survivors]") {
  auto spec = hp::testing::make_spec(12, 512, 8, 8, 1, 1, 1, 48, 1024);
  spec.parallel.replicas = 3;
  CHECK_THROWS_AS(hp::plan_on_survivors(spec, three_islands(), {0}), std::invalid_argument);
}
