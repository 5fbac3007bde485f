// Topology files: the dump of discovered reports reads back equal, the example files under
// configs/topologies build sane clusters, and mistakes name the file, the key and the line.
#include <catch2/catch.hpp>

#include <filesystem>

#include "common/errors.hpp"
#include "engine/topo/cluster.hpp"
#include "engine/topo/discover.hpp"
#include "engine/topo/report_format.hpp"
#include "engine/topo/topology_file.hpp"
#include "test/fixtures/sysfs_builder.hpp"
#include "test/unit/topo/topo_test_util.hpp"

using namespace holmes;
using namespace holmes::test;
using topo::NicKind;

namespace {

std::string error_of(const std::string& yaml) {
  try {
    topo::parse_topology_yaml(yaml, "t.yaml");
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("dumped reports read back equal", "[unit][topo]") {
  std::vector<topo::NodeReport> reports;
  for (int kind = 0; kind < 4; ++kind) {
    SysfsBuilder b;
    if (kind == 0) make_ib_hdr_node(b, "ib-node0", "10.0.0.11");
    if (kind == 1) make_roce_bond_node(b, "roce-node0", "10.2.0.11");
    if (kind == 2) make_ethernet_node(b, "eth-node0", "10.0.1.21");
    if (kind == 3) make_ib_port_down_node(b, "ib-spare0");
    auto d = gpus(8);
    d.name = "H100: \"SXM\" #1";  // needs quoting in YAML
    d.memory_gb = 79.6;
    reports.push_back(topo::discover_node(b.root(), d));
  }
  std::string text = topo::dump_topology_yaml(reports);
  auto back = topo::parse_topology_yaml(text, "dump.yaml");
  REQUIRE(back.size() == reports.size());
  for (size_t i = 0; i < back.size(); ++i) CHECK(topo::report_json(back[i]) == topo::report_json(reports[i]));
  CHECK(topo::dump_topology_yaml(back) == text);
}

TEST_CASE("hand-written entries: hostlists, counts, defaults", "[unit][topo]") {
  auto nodes = topo::parse_topology_yaml(R"(
nodes:
  - names: gpu[01-02]
    devices: {kind: cuda, count: 8, name: H100, memory_gb: 80, peak_tflops: 989}
    nics:
      - {kind: ib, rate_gbps: 200, count: 2, fabric: ib-a}
      - {kind: ib, name: "hca_[4-5]", rate_gbps: 100, state: down}
      - {kind: ethernet, name: eth0, rate_gbps: 25}
      - {kind: ethernet, rate_gbps: ~}
)", "t.yaml");
  REQUIRE(nodes.size() == 2);
  CHECK(nodes[0].hostname == "gpu01");
  CHECK(nodes[1].hostname == "gpu02");
  const auto& n = nodes[1].nics;
  REQUIRE(n.size() == 6);
  CHECK(n[0].name == "ib0");
  CHECK(n[1].name == "ib1");
  CHECK(n[1].port == 1);
  CHECK(n[1].fabric == "ib-a");
  CHECK(n[1].active);
  CHECK(n[2].name == "hca_4");
  CHECK_FALSE(n[3].active);
  CHECK(n[4].netdev == "eth0");
  CHECK(n[4].port == 0);
  CHECK(n[5].name == "ethernet0");
  CHECK_FALSE(n[5].rate_gbps.has_value());
  CHECK(nodes[0].devices.peak_tflops == 989);
  CHECK(nodes[0].devices.cpu_quota_period_ms == 100);  // the kernel's default CFS period
  auto held = topo::parse_topology_yaml(
      "nodes:\n  - names: c1\n    devices: {kind: cpu, cores: 2, cpu_quota_cores: 0.5, cpu_quota_period_ms: 20}\n",
      "t.yaml");
  REQUIRE(held.size() == 1);
  CHECK(held[0].devices.cpu_quota_cores == 0.5);
  CHECK(held[0].devices.cpu_quota_period_ms == 20);
  CHECK(held[0].devices.machine.empty());  // a machine of its own
  // Emulated nodes that share one machine's cores.
  auto shared = topo::parse_topology_yaml(
      "nodes:\n  - names: a[1-2]\n    devices: {kind: cpu, cores: 1, machine: box, machine_cores: 2}\n",
      "t.yaml");
  REQUIRE(shared.size() == 2);
  CHECK(shared[1].devices.machine == "box");
  CHECK(shared[1].devices.machine_cores == 2);
}

TEST_CASE("a machine several nodes share: named with its cores, one figure for it", "[unit][topo]") {
  CHECK_THAT(error_of("nodes:\n  - names: a\n    devices: {kind: cpu, machine: box}\n"),
             Catch::Contains("t.yaml:3") && Catch::Contains("devices.machine") && Catch::Contains("machine_cores"));
  CHECK_THAT(error_of("nodes:\n  - names: a\n    devices: {kind: cpu, machine_cores: 2}\n"),
             Catch::Contains("devices.machine_cores") && Catch::Contains("needs machine"));
  CHECK_THAT(error_of("nodes:\n  - names: a\n    devices: {kind: cpu, machine: box, machine_cores: 0}\n"),
             Catch::Contains("devices.machine_cores") && Catch::Contains("found 0"));
  CHECK_THAT(error_of("nodes:\n  - names: a\n    devices: {kind: cpu, machine: box, machine_cores: 2}\n"
                      "  - names: b\n    devices: {kind: cpu, machine: box, machine_cores: 4}\n"),
             Catch::Contains("machine 'box' has 4 cores here and 2 at host 'a'"));
  CHECK(error_of("nodes:\n  - names: a\n    devices: {kind: cpu, machine: box, machine_cores: 2}\n"
                 "  - names: b\n    devices: {kind: cpu, machine: other, machine_cores: 4}\n") == "no error");
}

TEST_CASE("the example topology files build sane clusters", "[unit][topo]") {
  namespace fs = std::filesystem;
  int files = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(HOLMES_SOURCE_DIR) / "configs" / "topologies")) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path().string());
    auto t = topo::build_cluster(topo::load_topology_file(entry.path().string()));
    CHECK(t.nodes.size() >= 2);
    CHECK(t.islands.size() >= 2);  // every example mixes network kinds
    CHECK(t.warnings.empty());
    bool rdma = false;
    for (const auto& isl : t.islands) rdma |= isl.kind != NicKind::kEthernet && isl.nodes.size() >= 2;
    CHECK(rdma);
    ++files;
  }
  CHECK(files >= 2);
}

TEST_CASE("topology file mistakes name the file, key and line", "[unit][topo]") {
  CHECK_THAT(error_of("nodes:\n  - names: a\n    devices: {kind: cpu}\n    nics:\n      - {kind: ib, speed: 200}\n"),
             Catch::Contains("t.yaml:5") && Catch::Contains("nodes[0].nics[0].speed") && Catch::Contains("rate_gbps"));
  CHECK_THAT(error_of("nodes:\n  - names: a\n    devices: {kind: cpu}\n    nics: [{kind: omnipath}]\n"),
             Catch::Contains("t.yaml:4") && Catch::Contains("'omnipath'"));
  CHECK_THAT(error_of("nodes:\n  - names: a\n    devices: {kind: cpu}\n    nics: [{kind: ib, rate_gbps: fast}]\n"),
             Catch::Contains("nics[0].rate_gbps") && Catch::Contains("'fast'"));
  CHECK_THAT(error_of("nodes:\n  - names: a\n    devices: {kind: cpu}\n    nics: [{kind: ib, name: x, count: 4}]\n"),
             Catch::Contains("count 4 but name 'x' names 1 ports"));
  CHECK_THAT(error_of("nodes:\n  - names: 'n[1-'\n    devices: {kind: cpu}\n"),
             Catch::Contains("t.yaml:2") && Catch::Contains("hostlist 'n[1-'"));
  CHECK_THAT(error_of("nodes:\n  - names: n[1-2]\n  - names: n2\n    devices: {kind: cpu}\n"),
             Catch::Contains("missing key 'devices'"));
  CHECK_THAT(error_of("nodes:\n  - names: n[1-2]\n    devices: {kind: cpu}\n  - names: n2\n    devices: {kind: cpu}\n"),
             Catch::Contains("host 'n2' is named by more than one"));
  CHECK_THAT(error_of("nodes:\n  - names: n1\n    devices: {kind: tpu}\n"), Catch::Contains("devices.kind"));
  CHECK_THAT(error_of("nodes:\n  - names: n[1-2]\n    devices: {kind: cpu}\n    nics: [{kind: ethernet, addresses: [10.0.0.1/24]}]\n"),
             Catch::Contains("addresses belong to one host"));
  CHECK_THAT(error_of("nodes:\n  - names: a\n    devices: {kind: cpu, memory_gb: .nan}\n"),
             Catch::Contains("devices.memory_gb") && Catch::Contains("'.nan'"));
  CHECK_THAT(error_of("nodes:\n  - names: a\n    devices: {kind: cpu, cpu_quota_period_ms: 2000}\n"),
             Catch::Contains("t.yaml:3") && Catch::Contains("devices.cpu_quota_period_ms") &&
                 Catch::Contains("found 2000"));
  CHECK_THAT(error_of("nodes: [\n"), Catch::Contains("t.yaml:") && Catch::Contains("not valid YAML"));
  CHECK_THAT(error_of(""), Catch::Contains("expected a mapping"));
  CHECK_THAT(error_of("hosts: []\n"), Catch::Contains("key 'hosts'") && Catch::Contains("accepted: nodes"));
  CHECK_THROWS_AS(topo::parse_topology_yaml("nodes: [{names: a, devices: {count: 0}}]\n", "t.yaml"), topo::TopologyError);
  CHECK_THROWS_WITH(topo::load_topology_file("/nonexistent/topo.yaml"), Catch::Contains("/nonexistent/topo.yaml"));
}

TEST_CASE("every problem of a topology file is reported at once, each with its place", "[unit][topo]") {
  const std::string text = R"(nodes:
  - names: a
    devices: {kind: cpu, count: 0, memory_gb: -3}
    nics:
      - {kind: ib, rate_gbps: -5, speed: 200}
      - {kind: roce, roce_version: 3, port: 300}
  - names: b[1-2]
    colour: red
)";
  const std::string msg = error_of(text);
  CHECK_THAT(msg, Catch::StartsWith("invalid topology (8 problems):"));
  // Each problem: file:line:column, key path, the value seen and the accepted range.
  CHECK_THAT(msg, Catch::Contains("t.yaml:3:33: nodes[0].devices.count: expected a whole number >= 1, found 0"));
  CHECK_THAT(msg, Catch::Contains("t.yaml:3:47: nodes[0].devices.memory_gb: expected a number of GB >= 0, found -3"));
  CHECK_THAT(msg, Catch::Contains("t.yaml:5:31: nodes[0].nics[0].rate_gbps: expected a number of Gb/s > 0 or ~ "
                                  "(unknown), found -5"));
  CHECK_THAT(msg, Catch::Contains("nodes[0].nics[0].speed: unknown key 'speed'"));
  CHECK_THAT(msg, Catch::Contains("nodes[0].nics[1].roce_version: expected a RoCE version (0 = not RoCE) in [0, 2], "
                                  "found 3"));
  CHECK_THAT(msg, Catch::Contains("nodes[0].nics[1].port: expected a port number in [0, 255], found 300"));
  CHECK_THAT(msg, Catch::Contains("t.yaml:8:5: nodes[1].colour: unknown key 'colour'"));
  CHECK_THAT(msg, Catch::Contains("t.yaml:7:5: nodes[1]: missing key 'devices'"));
}

TEST_CASE("one report travels as text and back", "[unit][topo]") {
  SysfsBuilder b;
  make_roce_bond_node(b, "roce-node3", "10.2.0.14");
  auto r = topo::discover_node(b.root(), gpus(8));
  auto back = topo::decode_report(topo::encode_report(r), "report of rank 3");
  CHECK(topo::report_json(back) == topo::report_json(r));
  std::string two = "nodes:\n  - names: a[1-2]\n    devices: {kind: cpu}\n";
  CHECK_THROWS_WITH(topo::decode_report(two, "report of rank 3"), Catch::Contains("report of rank 3") && Catch::Contains("found 2 nodes"));
}

TEST_CASE("a node's intra-node class in a topology file: said per kind, kept through a dump", "[unit][topo]") {
  const auto r = topo::parse_topology_yaml(
      "nodes:\n  - names: l0\n    devices: {kind: cuda, count: 4, name: L40S, intra_node: pcie}\n"
      "  - names: h0\n    devices: {kind: cuda, count: 8, name: H200, intra_node: nvswitch}\n",
      "t.yaml");
  CHECK(r[0].devices.intra_node == "pcie");
  CHECK(r[1].devices.intra_node == "nvswitch");
  CHECK(topo::parse_topology_yaml(topo::dump_topology_yaml(r), "dump")[0].devices.intra_node == "pcie");
  const std::string bad = error_of("nodes:\n  - names: g0\n    devices: {kind: cuda, intra_node: shm}\n");
  CHECK(bad.find("t.yaml:3") != std::string::npos);
  CHECK(bad.find("devices.intra_node") != std::string::npos);
  CHECK(bad.find("expected nvswitch, nvlink or pcie") != std::string::npos);
  CHECK(error_of("nodes:\n  - names: c0\n    devices: {kind: cpu, intra_node: nvlink}\n").find("expected shm") !=
        std::string::npos);
}
