// discover_node on fixture sysfs trees: the exact report for each fixture node, and a clear
// error naming the file for broken data.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>

#include "common/errors.hpp"
#include "engine/topo/discover.hpp"
#include "engine/topo/report_format.hpp"
#include "test/fixtures/sysfs_builder.hpp"
#include "test/unit/topo/topo_test_util.hpp"

using namespace holmes;
using namespace holmes::test;
using topo::NicKind;

namespace {

// The JSON form prints every field, so equal JSON = equal reports (and a readable diff).
void require_same(const topo::NodeReport& got, const topo::NodeReport& want) {
  REQUIRE(topo::report_json(got) == topo::report_json(want));
}

std::string error_of(const std::string& root) {
  try {
    topo::discover_node(root, topo::Devices{});
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("8 x IB HDR node with a 25 GbE port", "[unit][topo]") {
  SysfsBuilder b;
  make_ib_hdr_node(b, "ib-node0", "10.0.0.11");
  topo::NodeReport want;
  want.hostname = "ib-node0";
  want.devices = gpus(8);
  const char* buses[8] = {"18", "2a", "3a", "5d", "9a", "ab", "ba", "db"};
  for (int i = 0; i < 8; ++i)
    want.nics.push_back(ib_nic(fmt::format("mlx5_{}", i), true, 200, "fe80:0000:0000:0000",
                               fmt::format("0000:{}:00.0", buses[i]), i < 4 ? 0 : 1));
  want.nics.push_back(if_nic("ens21f0", NicKind::kEthernet, true, 25, "0000:c1:00.0", 1, {"10.0.0.11/16"}, "10.0.0.0/16"));
  want.nics.push_back(loopback_nic());
  require_same(topo::discover_node(b.root(), gpus(8)), want);
}

TEST_CASE("RoCE v2 node with two 100 GbE ports behind a bond", "[unit][topo]") {
  SysfsBuilder b;
  make_roce_bond_node(b, "roce-node0", "10.2.0.11");
  topo::NodeReport want;
  want.hostname = "roce-node0";
  want.devices = gpus(8);
  for (int i = 0; i < 2; ++i) {
    topo::Nic n;
    n.name = fmt::format("mlx5_{}", i);
    n.kind = NicKind::kRoce;
    n.active = true;
    n.rate_gbps = 100;
    n.port = 1;
    n.netdev = "bond0";            // the GID with the IPv4 address sits on the bond
    n.fabric = "10.2.0.0/16";
    n.roce_version = 2;
    n.gid_index = 3;               // RoCE v2 + IPv4 preferred over v1 and link-local
    n.pci = fmt::format("0000:4b:00.{}", i);
    n.numa_node = 0;
    n.addresses = {"10.2.0.11/16"};
    want.nics.push_back(n);
  }
  // ens1f0np0, ens1f1np1 and bond0 carry the RoCE ports: not listed again as Ethernet.
  want.nics.push_back(loopback_nic());
  require_same(topo::discover_node(b.root(), gpus(8)), want);
}

TEST_CASE("Ethernet-only node with docker and veth noise and an unreadable speed", "[unit][topo]") {
  SysfsBuilder b;
  make_ethernet_node(b, "eth-node0", "10.0.1.21");
  topo::NodeReport want;
  want.hostname = "eth-node0";
  want.devices = topo::Devices{};
  want.nics = {
      if_nic("docker0", NicKind::kEthernet, true, 10, "", -1, {"172.17.0.1/16"}, "172.17.0.0/16"),
      if_nic("eno1", NicKind::kEthernet, true, 25, "0000:19:00.0", 0, {"10.0.1.21/24"}, "10.0.1.0/24"),
      if_nic("eno2", NicKind::kEthernet, false, std::nullopt, "0000:19:00.1", 0, {}, ""),  // speed unreadable
      loopback_nic(),
      if_nic("veth1a2b3c", NicKind::kEthernet, true, std::nullopt, "", -1, {}, ""),  // speed -1
  };
  require_same(topo::discover_node(b.root(), topo::Devices{}), want);
}

TEST_CASE("IB node with one port down and an IPoIB interface", "[unit][topo]") {
  SysfsBuilder b;
  make_ib_port_down_node(b, "ib-spare0");
  topo::NodeReport want;
  want.hostname = "ib-spare0";
  want.devices = gpus(8);
  want.nics = {
      ib_nic("mlx5_0", true, 100, "fe80:0000:0000:0000", "0000:81:00.0", 0),
      ib_nic("mlx5_1", false, 10, "fe80:0000:0000:0000", "0000:82:00.0", 0),
      if_nic("ib0", NicKind::kIpoib, true, 100, "0000:81:00.0", 0, {"192.168.50.4/24"}, "192.168.50.0/24"),
      loopback_nic(),
  };
  require_same(topo::discover_node(b.root(), gpus(8)), want);
}

TEST_CASE("an empty root has no NICs, a missing root is an error", "[unit][topo]") {
  SysfsBuilder b;
  auto r = topo::discover_node(b.root(), topo::Devices{});
  CHECK(r.hostname == "unknown");
  CHECK(r.nics.empty());
  CHECK_THAT(error_of(b.root() + "/nope"), Catch::Contains("is not a folder"));
}

TEST_CASE("broken fixture data names the file and the value", "[unit][topo]") {
  SysfsBuilder b;
  SECTION("garbage rate") {
    b.ib_port("mlx5_0", 1, "4: ACTIVE", "fast", "fe80:0000:0000:0000:0000:0000:0000:0001", "", -1);
    auto msg = error_of(b.root());
    CHECK_THAT(msg, Catch::Contains("mlx5_0/ports/1/rate") && Catch::Contains("'fast'") &&
                        Catch::Contains("200 Gb/sec (4X HDR)"));
  }
  SECTION("unknown link layer") {
    b.ib_port("mlx5_0", 1, "4: ACTIVE", "200 Gb/sec (4X HDR)", "fe80:0000:0000:0000:0000:0000:0000:0001", "", -1);
    std::filesystem::remove(b.root() + "/sys/class/infiniband/mlx5_0/ports/1/link_layer");
    b.write("sys/class/infiniband/mlx5_0/ports/1/link_layer", "Omni-Path\n");
    CHECK_THAT(error_of(b.root()), Catch::Contains("link_layer") && Catch::Contains("'Omni-Path'"));
  }
  SECTION("malformed GID") {
    b.ib_port("mlx5_0", 1, "4: ACTIVE", "200 Gb/sec (4X HDR)", "fe80::1", "", -1);
    CHECK_THAT(error_of(b.root()), Catch::Contains("gids/0") && Catch::Contains("'fe80::1'"));
  }
  SECTION("garbage speed") {
    b.netdev(NetdevSpec("eth0").speed_mbps("fast"));
    CHECK_THAT(error_of(b.root()), Catch::Contains("eth0/speed") && Catch::Contains("'fast'"));
  }
  SECTION("missing type") {
    b.write("sys/class/net/eth0/operstate", "up\n");
    CHECK_THAT(error_of(b.root()), Catch::Contains("eth0/type"));
  }
  SECTION("bad RoCE GID type") {
    b.roce_port("mlx5_0", 1, "4: ACTIVE", "100 Gb/sec (4X EDR)",
                {{0, "RoCE v3", "fe80:0000:0000:0000:0000:0000:0000:0001", "eth0"}}, "", -1);
    CHECK_THAT(error_of(b.root()), Catch::Contains("gid_attrs/types/0") && Catch::Contains("'RoCE v3'"));
  }
  SECTION("bad address line") {
    b.netdev(NetdevSpec("eth0").speed_mbps("1000"));
    b.address("eth0", "10.0.0.300/24");
    CHECK_THAT(error_of(b.root()), Catch::Contains("fixture/addresses:1") && Catch::Contains("10.0.0.300/24"));
  }
}

TEST_CASE("other interface types and link layers are skipped, loopback up from flags", "[unit][topo]") {
  SysfsBuilder b;
  b.write("sys/class/infiniband/efa_0/ports/1/link_layer", "Unknown\n");  // neither IB nor RoCE
  b.write("sys/class/infiniband/efa_0/ports/1/state", "4: ACTIVE\n");
  b.netdev(NetdevSpec("tun0").arphrd(65534).state("unknown"));
  b.netdev(NetdevSpec("lo").arphrd(772).state("unknown").flags_hex("0x8"));  // IFF_UP clear
  auto r = topo::discover_node(b.root(), topo::Devices{});
  REQUIRE(r.nics.size() == 1);
  CHECK(r.nics[0].name == "lo");
  CHECK(r.nics[0].kind == NicKind::kLoopback);
  CHECK_FALSE(r.nics[0].active);
}

TEST_CASE("IPv4 subnets", "[unit][topo]") {
  CHECK(topo::ipv4_subnet("10.1.2.3/16", "x") == "10.1.0.0/16");
  CHECK(topo::ipv4_subnet("192.168.7.130/25", "x") == "192.168.7.128/25");
  CHECK(topo::ipv4_subnet("8.8.8.8/32", "x") == "8.8.8.8/32");
  CHECK(topo::ipv4_subnet("8.8.8.8/0", "x") == "0.0.0.0/0");
  CHECK_THROWS_AS(topo::ipv4_subnet("10.1.2/16", "x"), UserError);
  CHECK_THROWS_AS(topo::ipv4_subnet("10.1.2.3/33", "x"), UserError);
  CHECK_THROWS_AS(topo::ipv4_subnet("10.1.2.3", "x"), UserError);
}

TEST_CASE("the CPU as device", "[unit][topo]") {
  auto d = topo::detect_cpu_devices();
  CHECK(d.kind == "cpu");
  CHECK(d.count == 1);
  CHECK(d.cores >= 1);
  CHECK(d.memory_gb > 0);
  CHECK_FALSE(d.name.empty());
}

TEST_CASE("the intra-node class: an NVSwitch on the PCI bus, else the driver's NVLinks, else unsaid", "[unit][topo]") {
  topo::Devices gpu = gpus(8);
  SysfsBuilder b;
  b.pci_function("0000:18:00.0", "0x10de", "0x030200");  // the GPUs: 3D controllers
  b.pci_function("0000:2a:00.0", "0x10de", "0x030200");
  b.pci_function("0000:c1:00.0", "0x15b3", "0x020700");  // an InfiniBand card
  CHECK(topo::discover_intra_class(b.root(), gpu).empty());  // no switch, the driver not asked
  gpu.nvlinks = 12;
  CHECK(topo::discover_intra_class(b.root(), gpu) == "nvlink");
  gpu.nvlinks = 0;
  CHECK(topo::discover_intra_class(b.root(), gpu) == "pcie");
  CHECK(topo::discover_node(b.root(), gpu).devices.intra_node == "pcie");
  b.pci_function("0000:85:00.0", "0x10de", "0x068000");  // an NVSwitch (bridge, other)
  CHECK(topo::discover_intra_class(b.root(), gpu) == "nvswitch");
  CHECK(topo::discover_intra_class(b.root(), topo::detect_cpu_devices()).empty());  // CPU: shm by default
  // Garbage names the file.
  b.pci_function("0000:01:00.0", "0x10de", "bridge");  // read before the switch
  CHECK_THROWS_WITH(topo::discover_intra_class(b.root(), gpu),
                    Catch::Contains("0000:01:00.0/class") && Catch::Contains("'bridge'"));
}

TEST_CASE("the intra-node class a model usually has, and what a topology file may say", "[unit][topo]") {
  topo::Devices d = gpus(8);
  d.name = "NVIDIA L40S";
  CHECK(topo::intra_class_of(d) == "pcie");
  d.name = "NVIDIA A10G";
  CHECK(topo::intra_class_of(d) == "pcie");
  d.name = "NVIDIA H100 80GB HBM3";
  CHECK(topo::intra_class_of(d) == "nvswitch");
  d.name = "NVIDIA A100-SXM4-40GB";
  CHECK(topo::intra_class_of(d) == "nvswitch");  // A10 is a PCIe card, A100 is not
  d.intra_node = "pcie";
  CHECK(topo::intra_class_of(d) == "pcie");  // said wins
  CHECK(topo::intra_class_of(topo::detect_cpu_devices()) == "shm");
}
