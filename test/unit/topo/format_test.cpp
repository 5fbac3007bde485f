// The JSON form is a documented interface (docs/topology.md): pin it byte for byte. Also the
// GPU peak table that fills in discovered CUDA devices.
#include <catch2/catch.hpp>

#include "engine/topo/discover.hpp"
#include "engine/topo/gpu_peaks.hpp"
#include "engine/topo/report_format.hpp"
#include "test/fixtures/sysfs_builder.hpp"
#include "test/unit/topo/topo_test_util.hpp"

using namespace holmes;
using namespace holmes::test;

TEST_CASE("report JSON is stable", "[unit][topo]") {
  topo::NodeReport r;
  r.hostname = "n\"1";
  r.devices = gpus(8);
  r.nics = {ib_nic("mlx5_0", true, 2.5, "fe80:0000:0000:0000", "0000:18:00.0", 0),
            if_nic("eth0", topo::NicKind::kEthernet, false, std::nullopt, "", -1, {"10.0.0.1/24", "10.0.1.1/24"},
                   "10.0.0.0/24")};
  CHECK(topo::report_json(r) ==
        "{\n"
        "  \"hostname\": \"n\\\"1\",\n"
        "  \"devices\": {\"kind\": \"cuda\", \"count\": 8, \"name\": \"H100\", \"memory_gb\": 80, \"peak_tflops\": 989, "
        "\"cores\": 0, \"intra_node\": \"nvswitch\"},\n"
        "  \"nics\": [\n"
        "    {\"name\": \"mlx5_0\", \"kind\": \"ib\", \"state\": \"active\", \"rate_gbps\": 2.5, \"port\": 1, "
        "\"netdev\": \"\", \"fabric\": \"fe80:0000:0000:0000\", \"numa_node\": 0, \"pci\": \"0000:18:00.0\", "
        "\"virtual\": false, \"roce_version\": 0, \"gid_index\": -1, \"addresses\": []},\n"
        "    {\"name\": \"eth0\", \"kind\": \"ethernet\", \"state\": \"down\", \"rate_gbps\": null, \"port\": 0, "
        "\"netdev\": \"eth0\", \"fabric\": \"10.0.0.0/24\", \"numa_node\": -1, \"pci\": \"\", \"virtual\": true, "
        "\"roce_version\": 0, \"gid_index\": -1, \"addresses\": [\"10.0.0.1/24\", \"10.0.1.1/24\"]}\n"
        "  ]\n"
        "}\n");
  r.nics.clear();
  CHECK_THAT(topo::report_json(r), Catch::EndsWith("\"nics\": []\n}\n"));
  CHECK(json_quote("a\\b\n\x01") == "\"a\\\\b\\n\\u0001\"");
}

TEST_CASE("report text has one row per NIC", "[unit][topo]") {
  SysfsBuilder b;
  make_roce_bond_node(b, "roce-node0", "10.2.0.11");
  std::string text = topo::report_text(topo::discover_node(b.root(), gpus(8)));
  CHECK_THAT(text, Catch::Contains("host     roce-node0") && Catch::Contains("nics     3") &&
                       Catch::Contains("mlx5_1:1") && Catch::Contains("roce v2") && Catch::Contains("loopback*"));
}

TEST_CASE("GPU peaks by model name", "[unit][topo]") {
  CHECK(topo::known_peak_tflops("NVIDIA H100 80GB HBM3") == 989);
  CHECK(topo::known_peak_tflops("NVIDIA H100 PCIe") == 756);
  CHECK(topo::known_peak_tflops("NVIDIA A100-SXM4-40GB") == 312);
  CHECK(topo::known_peak_tflops("NVIDIA L40S") == 362);
  CHECK(topo::known_peak_tflops("NVIDIA L40") == 181);
  CHECK(topo::known_peak_tflops("Tesla T4") == 0);
  topo::Devices d = gpus(8);
  d.name = "NVIDIA H200";
  d.peak_tflops = 0;
  SysfsBuilder b;
  CHECK(topo::discover_node(b.root(), d).devices.peak_tflops == 989);  // filled in
  d.peak_tflops = 500;
  CHECK(topo::discover_node(b.root(), d).devices.peak_tflops == 500);  // a given figure wins
}
