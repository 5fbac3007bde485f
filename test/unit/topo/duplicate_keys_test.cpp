// Topology and calibration files refuse a key given twice in one mapping (YAML forbids it;
// yaml-cpp would keep both and the reader silently take one), naming both lines.
#include <catch2/catch.hpp>

#include <string>

#include "common/errors.hpp"
#include "engine/topo/calibration.hpp"
#include "engine/topo/topology_file.hpp"

using namespace holmes;

namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a topology file with a key twice in one node entry is refused, naming both lines") {
  const std::string text =
      "nodes:\n"
      "  - names: a\n"
      "    devices: {kind: cpu, count: 1}\n"
      "    nics: [{kind: ethernet, name: eth0, rate_gbps: 10}]\n"
      "    devices: {kind: cpu, count: 8}\n";
  const std::string msg = error_of([&] { topo::parse_topology_yaml(text, "t.yaml"); });
  CHECK_THAT(msg, Catch::Contains("t.yaml:5:5: nodes[0].devices: 'devices' is given twice in 'nodes[0]' (lines 3 "
                                  "and 5)"));
}

TEST_CASE("a calibration file with a section twice is refused, naming both lines") {
  const std::string text =
      "format: holmes-calibration/1\n"
      "compute: {device_tflops: 1.5}\n"
      "links: {}\n"
      "compute: {device_tflops: 9.5}\n";
  const std::string msg = error_of([&] { topo::parse_calibration_yaml(text, "cal.yaml"); });
  CHECK_THAT(msg, Catch::Contains("cal.yaml:4:1: compute: 'compute' is given twice in the top level (lines 2 and 4)"));
}

TEST_CASE("a topology file indented with a tab says so") {
  const std::string msg = error_of([&] { topo::parse_topology_yaml("nodes:\n\t- names: a\n", "t.yaml"); });
  CHECK_THAT(msg, Catch::Contains("not valid YAML: line 2 indents with a tab; tabs cannot indent YAML"));
}
