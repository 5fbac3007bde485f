// Islands, the links the planner prices between nodes, interfaces and warnings for clusters that mix the fixture nodes.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "engine/plan/links.hpp"
#include "engine/spec/job_spec.hpp"
#include "engine/topo/cluster.hpp"
#include "engine/topo/discover.hpp"
#include "test/fixtures/sysfs_builder.hpp"
#include "test/unit/topo/topo_test_util.hpp"

using namespace holmes;
using namespace holmes::test;
using topo::NicKind;

namespace {

topo::NodeReport ib_node(int i, const std::string& prefix = "fe80:0000:0000:0000") {
  SysfsBuilder b;
  make_ib_hdr_node(b, fmt::format("ib-node{}", i), fmt::format("10.0.0.{}", 11 + i), prefix);
  return topo::discover_node(b.root(), gpus(8));
}

topo::NodeReport roce_node(int i) {
  SysfsBuilder b;
  make_roce_bond_node(b, fmt::format("roce-node{}", i), fmt::format("10.2.0.{}", 11 + i));
  return topo::discover_node(b.root(), gpus(8));
}

topo::NodeReport eth_node(int i) {
  SysfsBuilder b;
  make_ethernet_node(b, fmt::format("eth-node{}", i), fmt::format("10.0.1.{}", 21 + i));
  return topo::discover_node(b.root(), gpus(8));
}

topo::NodeReport ib_spare_node() {
  SysfsBuilder b;
  make_ib_port_down_node(b, "ib-spare0");
  return topo::discover_node(b.root(), gpus(8));
}

// The link the planner prices between nodes a and b of the cluster (plan::link_between, the
// one link model): its kind and the node's bandwidth on it (Gb/s per node and direction, the
// slower end's; a rank gets its share of it), the same both ways.
void check_link(const topo::ClusterTopology& t, int a, int b, plan::LinkKind kind, double node_gbps) {
  INFO("link " << a << " - " << b);
  static const spec::JobSpec defaults;
  const plan::Facts f = plan::collect_facts(defaults, t);
  const plan::LinkCost l = plan::link_between(f, a, b);
  CHECK(l.kind == kind);
  if (kind != plan::LinkKind::kIntraNode) {
    const double eff = f.efficiency[static_cast<int>(kind)];
    CHECK(l.gbps_per_rank / eff * t.nodes[a].devices.count == Approx(node_gbps));
    CHECK(l.crosses_island == (t.island_of[a] != t.island_of[b]));
  }
  const plan::LinkCost r = plan::link_between(f, b, a);
  CHECK(r.kind == l.kind);
  CHECK(r.gbps_per_rank == l.gbps_per_rank);
}

constexpr auto kIntraNode = plan::LinkKind::kIntraNode;
constexpr auto kIbLink = plan::LinkKind::kIb;
constexpr auto kRoceLink = plan::LinkKind::kRoce;
constexpr auto kEthernetLink = plan::LinkKind::kEthernet;

}  // namespace

TEST_CASE("4 IB + 4 RoCE nodes: two islands", "[unit][topo]") {
  std::vector<topo::NodeReport> nodes;
  for (int i = 0; i < 4; ++i) nodes.push_back(ib_node(i));
  for (int i = 0; i < 4; ++i) nodes.push_back(roce_node(i));
  auto t = topo::build_cluster(nodes);
  REQUIRE(t.islands.size() == 2);
  CHECK(t.islands[0].kind == NicKind::kIb);
  CHECK(t.islands[0].fabric == "fe80:0000:0000:0000");
  CHECK(t.islands[0].nodes == std::vector<int>{0, 1, 2, 3});
  CHECK(t.islands[0].rdma_gbps_per_node == 1600);
  CHECK(t.islands[1].kind == NicKind::kRoce);
  CHECK(t.islands[1].fabric == "10.2.0.0/16");
  CHECK(t.islands[1].nodes == std::vector<int>{4, 5, 6, 7});
  CHECK(t.islands[1].rdma_gbps_per_node == 200);
  CHECK(t.island_of == std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1});
  CHECK(t.warnings.empty());
  check_link(t, 0, 0, kIntraNode, 0);
  check_link(t, 0, 3, kIbLink, 1600);
  check_link(t, 4, 7, kRoceLink, 200);
  check_link(t, 1, 5, kEthernetLink, 25);  // slower end: the IB node's 25 GbE
  CHECK(t.ethernet_gbps(0) == 25);
  CHECK(t.ethernet_gbps(4) == 100);  // the RoCE ports are the node's Ethernet
  CHECK(t.tcp_interface(0, false) == "ens21f0");
  CHECK(t.tcp_interface(0, true) == "ens21f0");  // no IPoIB on this node
  CHECK(t.tcp_interface(4, false) == "bond0");
  CHECK(t.tcp_interface(4, true) == "bond0");
}

TEST_CASE("IB + Ethernet-only nodes: each Ethernet node is its own island", "[unit][topo]") {
  auto t = topo::build_cluster({ib_node(0), ib_node(1), eth_node(0), eth_node(1)});
  REQUIRE(t.islands.size() == 3);
  CHECK(t.islands[0].kind == NicKind::kIb);
  CHECK(t.islands[1].kind == NicKind::kEthernet);
  CHECK(t.islands[1].nodes == std::vector<int>{2});
  CHECK(t.islands[1].rdma_gbps_per_node == 0);
  CHECK(t.islands[2].nodes == std::vector<int>{3});
  CHECK(t.island_of == std::vector<int>{0, 0, 1, 2});
  check_link(t, 0, 1, kIbLink, 1600);
  check_link(t, 2, 3, kEthernetLink, 25);
  check_link(t, 0, 2, kEthernetLink, 25);
  CHECK(t.tcp_interface(2, false) == "eno1");  // docker0 has an address but is virtual
  CHECK(t.warnings.empty());
}

TEST_CASE("different IB subnet prefixes are different islands", "[unit][topo]") {
  auto t = topo::build_cluster({ib_node(0, "fe80:0000:0000:0000"), ib_node(1, "fe80:0000:0000:0001"),
                                ib_node(2, "fe80:0000:0000:0000"), ib_node(3, "fe80:0000:0000:0001")});
  REQUIRE(t.islands.size() == 2);
  CHECK(t.islands[0].nodes == std::vector<int>{0, 2});
  CHECK(t.islands[1].nodes == std::vector<int>{1, 3});
  check_link(t, 0, 1, kEthernetLink, 25);
  check_link(t, 1, 3, kIbLink, 1600);
}

TEST_CASE("a port down lowers the island's per-node bandwidth, with a warning", "[unit][topo]") {
  auto t = topo::build_cluster({ib_node(0), ib_spare_node()});
  REQUIRE(t.islands.size() == 1);
  CHECK(t.islands[0].rdma_gbps_per_node == 100);  // only mlx5_0 of the spare node is ACTIVE
  check_link(t, 0, 1, kIbLink, 100);
  REQUIRE(t.warnings.size() == 2);  // bandwidth differs; the spare node's Ethernet speed is unknown
  CHECK_THAT(t.warnings[0], Catch::Contains("100 to 1600 Gb/s"));
  CHECK_THAT(t.warnings[1], Catch::Contains("ib-spare0") && Catch::Contains("assumed 10 Gb/s"));
  CHECK(t.tcp_interface(1, true) == "ib0");     // IPoIB inside the IB island
  CHECK(t.tcp_interface(1, false) == "ib0");    // the only interface with an IP
  CHECK(t.ethernet_gbps(1) == topo::kAssumedEthernetGbps);
}

TEST_CASE("a node alone on its fabric gets a warning", "[unit][topo]") {
  auto t = topo::build_cluster({ib_node(0), ib_node(1), ib_node(2, "fe80:0000:0000:00ff")});
  REQUIRE(t.islands.size() == 2);
  REQUIRE(t.warnings.size() == 1);
  CHECK_THAT(t.warnings[0], Catch::Contains("ib-node2") && Catch::Contains("only node on ib fabric 'fe80:0000:0000:00ff'"));
}

TEST_CASE("a node with IB and RoCE joins its faster fabric, with a warning", "[unit][topo]") {
  auto mixed = ib_node(0);
  auto roce = roce_node(0);
  for (const auto& n : roce.nics)
    if (n.kind == NicKind::kRoce) mixed.nics.push_back(n);
  auto t = topo::build_cluster({mixed, roce_node(1)});
  CHECK(t.island_of[0] != t.island_of[1]);
  CHECK(t.islands[t.island_of[0]].kind == NicKind::kIb);
  // Both have RoCE ports, but the mixed node is in the IB island: the planner keeps groups
  // inside islands, so it prices (and groups) the pair over Ethernet.
  check_link(t, 0, 1, kEthernetLink, 25);
  bool warned = false;
  for (const auto& w : t.warnings) warned |= w.find("joins the island of ib fabric") != std::string::npos;
  CHECK(warned);
}

TEST_CASE("inconsistent node reports are TopologyErrors", "[unit][topo]") {
  auto a = ib_node(0), b = ib_node(1);
  SECTION("different GPU counts") {
    b.devices.count = 4;
    CHECK_THROWS_WITH(topo::build_cluster({a, b}), Catch::Contains("ib-node0: 8 cuda") && Catch::Contains("ib-node1: 4 cuda"));
  }
  SECTION("cuda beside cpu") {
    b.devices = topo::Devices{};
    CHECK_THROWS_AS(topo::build_cluster({a, b}), topo::TopologyError);
  }
  SECTION("duplicate host") {
    b.hostname = a.hostname;
    CHECK_THROWS_WITH(topo::build_cluster({a, b}), Catch::Contains("'ib-node0' appears twice"));
  }
  SECTION("no nodes") { CHECK_THROWS_AS(topo::build_cluster({}), topo::TopologyError); }
  SECTION("different models warn") {
    b.devices.name = "A100";
    auto t = topo::build_cluster({a, b});
    REQUIRE(t.warnings.size() == 1);
    CHECK_THAT(t.warnings[0], Catch::Contains("A100") && Catch::Contains("H100"));
  }
}

TEST_CASE("a single CPU node with only loopback", "[unit][topo]") {
  topo::NodeReport n;
  n.hostname = "laptop";
  n.nics = {loopback_nic()};
  auto t = topo::build_cluster({n});
  REQUIRE(t.islands.size() == 1);
  CHECK(t.islands[0].kind == NicKind::kEthernet);
  CHECK(t.tcp_interface(0, false) == "lo");
  CHECK(t.warnings.empty());
}

TEST_CASE("a node whose RDMA ports are all down is an Ethernet island", "[unit][topo]") {
  auto dead = ib_node(1);
  for (auto& n : dead.nics)
    if (n.kind == NicKind::kIb) n.active = false;
  auto t = topo::build_cluster({ib_node(0), dead, ib_node(2)});
  REQUIRE(t.islands.size() == 2);
  CHECK(t.islands[0].nodes == std::vector<int>{0, 2});
  CHECK(t.islands[1].kind == NicKind::kEthernet);
  CHECK(t.islands[1].nodes == std::vector<int>{1});
  check_link(t, 0, 1, kEthernetLink, 25);
  check_link(t, 0, 2, kIbLink, 1600);
}

TEST_CASE("RoCE ports without an IPv4 address share an assumed fabric, with a warning", "[unit][topo]") {
  auto a = roce_node(0), b = roce_node(1);
  for (auto* r : {&a, &b})
    for (auto& n : r->nics)
      if (n.kind == NicKind::kRoce) {
        n.fabric.clear();
        n.addresses.clear();
      }
  auto t = topo::build_cluster({a, b});
  REQUIRE(t.islands.size() == 1);
  CHECK(t.islands[0].kind == NicKind::kRoce);
  REQUIRE(t.warnings.size() == 1);
  CHECK_THAT(t.warnings[0], Catch::Contains("roce-node[0-1]") && Catch::Contains("assumed they all share one fabric"));
}

TEST_CASE("reports of every rank collapse to one per node", "[unit][topo]") {
  auto a = ib_node(0), b = roce_node(0);
  auto nodes = topo::unique_nodes({a, a, b, a, b});
  REQUIRE(nodes.size() == 2);
  CHECK(nodes[0].hostname == "ib-node0");
  CHECK(nodes[1].hostname == "roce-node0");
  auto impostor = b;
  impostor.hostname = "ib-node0";
  CHECK_THROWS_WITH(topo::unique_nodes({a, impostor}), Catch::Contains("rank 1 reports host 'ib-node0'"));
}

TEST_CASE("TCP goes over a plain Ethernet bond, not a container bridge", "[unit][topo]") {
  topo::NodeReport n;
  n.hostname = "bonded";
  n.nics = {
      if_nic("bond0", NicKind::kEthernet, true, 50, "", -1, {"10.9.0.5/24"}, "10.9.0.0/24"),
      if_nic("docker0", NicKind::kEthernet, true, 100, "", -1, {"172.17.0.1/16"}, "172.17.0.0/16"),
      if_nic("eno1", NicKind::kEthernet, true, 25, "0000:19:00.0", 0, {}, ""),  // bond slaves: no address
      if_nic("eno2", NicKind::kEthernet, true, 25, "0000:19:00.1", 0, {}, ""),
      loopback_nic(),
  };
  auto t = topo::build_cluster({n});
  CHECK(t.tcp_interface(0, false) == "bond0");
  CHECK(t.tcp_interface(0, true) == "bond0");
  CHECK(t.ethernet_gbps(0) == 25);  // the fastest physical port
}

TEST_CASE("cluster description lists islands as hostlists", "[unit][topo]") {
  std::vector<topo::NodeReport> nodes;
  for (int i = 0; i < 4; ++i) nodes.push_back(ib_node(i));
  for (int i = 0; i < 2; ++i) nodes.push_back(eth_node(i));
  std::string text = topo::describe_cluster(topo::build_cluster(nodes));
  CHECK(text ==
        "6 nodes, 3 islands\n"
        "  island 0: ib fe80:0000:0000:0000 ib-node[0-3] (4 nodes, 1600 Gb/s RDMA per node)\n"
        "  island 1: ethernet eth-node0 (1 node, no RDMA)\n"
        "  island 2: ethernet eth-node1 (1 node, no RDMA)\n");
}

TEST_CASE("a topology file overrides discovered nodes by host name", "[unit][topo]") {
  auto fixed = ib_node(1);
  for (auto& n : fixed.nics) n.fabric = "ib-a";
  auto stranger = ib_node(7);
  std::vector<std::string> notes;
  auto nodes = topo::overlay_reports({ib_node(0), ib_node(1), ib_node(2)}, {stranger, fixed}, &notes);
  REQUIRE(nodes.size() == 3);
  CHECK(nodes[0].nics[0].fabric == "fe80:0000:0000:0000");
  CHECK(nodes[1].nics[0].fabric == "ib-a");
  CHECK(nodes[2].nics[0].fabric == "fe80:0000:0000:0000");
  REQUIRE(notes.size() == 2);
  CHECK_THAT(notes[0], Catch::Contains("replaces what discovery found on ib-node1"));
  CHECK_THAT(notes[1], Catch::Contains("ib-node7 which are not in this job"));
  CHECK(topo::overlay_reports({ib_node(0)}, {}, nullptr).size() == 1);
}

TEST_CASE("order_nodes puts the reports in launch order and names unknown or repeated hosts") {
  std::vector<topo::NodeReport> file{ib_node(0), ib_node(1), roce_node(0), roce_node(1)};
  auto ordered = topo::order_nodes(file, {"ib-node0", "roce-node0", "ib-node1"}, "--nodes 'x'");
  REQUIRE(ordered.size() == 3);
  CHECK(ordered[0].hostname == "ib-node0");
  CHECK(ordered[1].hostname == "roce-node0");
  CHECK(ordered[2].hostname == "ib-node1");
  try {
    topo::order_nodes(file, {"ib-node0", "gpu7"}, "--nodes 'ib-node0,gpu7'");
    FAIL("no error");
  } catch (const topo::TopologyError& e) {
    const std::string m = e.what();
    CHECK(m.find("--nodes 'ib-node0,gpu7'") != std::string::npos);
    CHECK(m.find("gpu7") != std::string::npos);
    CHECK(m.find("roce-node[0-1]") != std::string::npos);  // what the topology has
  }
  CHECK_THROWS_AS(topo::order_nodes(file, {"ib-node0", "ib-node0"}, "SLURM_JOB_NODELIST"), topo::TopologyError);
}
