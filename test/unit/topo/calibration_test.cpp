// Calibration files: the format round-trips, and bad files are refused naming file, line and key.
#include <catch2/catch.hpp>

#include <string>

#include "common/errors.hpp"
#include "engine/topo/calibration.hpp"

using namespace holmes;

namespace {

std::string error_of(const std::string& text) {
  try {
    topo::parse_calibration_yaml(text, "cal.yaml");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a calibration round-trips through its file format") {
  topo::Calibration c;
  c.source = "job 'x', 4 ranks";
  c.device_tflops = 0.0465;
  c.declared_tflops = 0.025;
  c.update_ns_per_param = 4.25;
  c.cpu_tflops = 0.0612;
  c.cpu_tensor = 2;
  c.host_comm_ns_per_byte = 3.25;
  c.host_comm_steps_ns_per_byte = 4.5;
  c.host_comm_tp_ns_per_byte = 11.5;
  c.stages = {{0, 8, 0.0448}, {1, 8, 0.0484}};
  c.links["ethernet"] = {0.62, 121.5, 0.155, 0.25, 2};
  c.links["ib"] = {0.94, 57, 1.88, 2, 1};
  const topo::Calibration back = topo::parse_calibration_yaml(topo::format_calibration_yaml(c), "mem");
  CHECK(back.source == c.source);
  CHECK(back.device_tflops == c.device_tflops);
  CHECK(back.update_ns_per_param == c.update_ns_per_param);
  CHECK(back.cpu_tflops == c.cpu_tflops);
  CHECK(back.cpu_tensor == 2);
  CHECK(back.host_comm_ns_per_byte == 3.25);
  CHECK(back.host_comm_steps_ns_per_byte == 4.5);
  CHECK(back.host_comm_tp_ns_per_byte == 11.5);
  REQUIRE(back.stages.size() == 2);
  CHECK(back.stages[1].tflops == c.stages[1].tflops);
  REQUIRE(back.links.size() == 2);
  CHECK(back.links.at("ethernet").efficiency == 0.62);
  CHECK(back.links.at("ib").latency_us == 57);
  CHECK(back.links.at("ib").groups == 1);
  CHECK(back.outer.efficiency == 0);  // not measured: not written
  CHECK_FALSE(back.empty());
  topo::Calibration outer_only;
  outer_only.outer = {"ethernet", 0.72, 571.5, 16};
  const topo::Calibration o = topo::parse_calibration_yaml(topo::format_calibration_yaml(outer_only), "mem");
  CHECK(o.outer.link == "ethernet");
  CHECK(o.outer.efficiency == 0.72);
  CHECK(o.outer.exchange_ms == 571.5);
  CHECK(o.outer.syncs == 16);
  CHECK(o.outer.drift_ms == 0);  // not measured
  CHECK(topo::format_calibration_yaml(outer_only).find("drift_ms") == std::string::npos);  // not written
  CHECK_FALSE(o.empty());
  outer_only.outer.drift_ms = 41.5;
  CHECK(topo::parse_calibration_yaml(topo::format_calibration_yaml(outer_only), "mem").outer.drift_ms == 41.5);
  const std::string bad = error_of("format: holmes-calibration/1\nouter: {link: ethernet, efficiency: 0.7, drift_ms: -3}\n");
  CHECK(bad.find("outer.drift_ms") != std::string::npos);
  CHECK(topo::parse_calibration_yaml("format: holmes-calibration/1\n", "mem").empty());
}

TEST_CASE("a calibration of an older binary (no host_comm_ns_per_byte) reads as not measured") {
  // Files written before the probe measured the host communication path's CPU per byte: the
  // figure is 0 (the quota bound counts the training thread alone, as those binaries did).
  const topo::Calibration c = topo::parse_calibration_yaml(
      "format: holmes-calibration/1\ncompute: {device_tflops: 0.0118, cpu_tflops: 0.0523, cpu_tensor: 1}\n", "old");
  CHECK(c.cpu_tflops == 0.0523);
  CHECK(c.host_comm_ns_per_byte == 0);
  CHECK(topo::format_calibration_yaml(c).find("host_comm") == std::string::npos);  // not measured: not written
  const std::string e = error_of("format: holmes-calibration/1\ncompute: {host_comm_ns_per_byte: -1}\n");
  CHECK(e.find("compute.host_comm_ns_per_byte") != std::string::npos);
  CHECK(e.find(">= 0") != std::string::npos);
}

TEST_CASE("bad calibration files name the file, the line and the key") {
  const std::string head = "format: holmes-calibration/1\n";
  std::string e = error_of(head + "links:\n  infiniband: {efficiency: 0.5}\n");
  CHECK(e.find("cal.yaml:3") != std::string::npos);
  CHECK(e.find("links.infiniband") != std::string::npos);
  CHECK(e.find("ethernet, ib, intra-node, roce") != std::string::npos);
  e = error_of(head + "links:\n  ib: {efficiency: 0}\n");
  CHECK(e.find("links.ib.efficiency") != std::string::npos);
  CHECK(e.find("> 0") != std::string::npos);
  e = error_of(head + "compute: {device_tflops: fast}\n");
  CHECK(e.find("compute.device_tflops") != std::string::npos);
  CHECK(e.find("'fast'") != std::string::npos);
  e = error_of("format: holmes-plan/1\n");
  CHECK(e.find("holmes-calibration/1") != std::string::npos);
  CHECK(error_of(head + "extra: 1\n").find("accepted: collectives, compute, device, format, links, outer, source, tables") != std::string::npos);
  e = error_of(head + "outer: {link: infiniband, efficiency: 0.7}\n");
  CHECK(e.find("outer.link") != std::string::npos);
  CHECK(e.find("'infiniband'") != std::string::npos);
  e = error_of(head + "outer: {link: ethernet, efficiency: 0}\n");
  CHECK(e.find("outer.efficiency") != std::string::npos);
  CHECK(e.find("> 0") != std::string::npos);
  CHECK_THROWS_AS(topo::load_calibration_file("/nonexistent/cal.yaml"), UserError);
}

TEST_CASE("a calibration records the devices it was measured on, and never prices another kind") {
  topo::Calibration c;
  c.device = {"cuda", "NVIDIA H200", "550.54.15", "12.4", "120403", "91900", "2.21.5", "2026-12-01T10:00:00Z"};
  c.device_tflops = 400;
  const topo::Calibration back = topo::parse_calibration_yaml(topo::format_calibration_yaml(c), "mem");
  CHECK(back.device.kind == "cuda");
  CHECK(back.device.name == "NVIDIA H200");
  CHECK(back.device.driver == "550.54.15");
  CHECK(back.device.cuda == "12.4");
  CHECK(back.device.cublaslt == "120403");
  CHECK(back.device.cudnn == "91900");
  CHECK(back.device.nccl == "2.21.5");
  CHECK(back.device.date == "2026-12-01T10:00:00Z");
  CHECK(topo::format_calibration_yaml(c).find("format: holmes-calibration/2") != std::string::npos);
  // Format 1 has no record: every such file came from a CPU job.
  const topo::Calibration old = topo::parse_calibration_yaml("format: holmes-calibration/1\ncompute: {device_tflops: 0.05}\n",
                                                             "old.yaml");
  CHECK(old.device.kind == "cpu");
  // Format 2 says what it was measured on, in the accepted kinds.
  CHECK(error_of("format: holmes-calibration/2\ncompute: {device_tflops: 0.05}\n").find("cal.yaml") != std::string::npos);
  CHECK(error_of("format: holmes-calibration/2\ncompute: {device_tflops: 0.05}\n").find("device") != std::string::npos);
  const std::string tpu = error_of("format: holmes-calibration/2\ndevice: {kind: tpu}\n");
  CHECK(tpu.find("cal.yaml:2") != std::string::npos);
  CHECK(tpu.find("device.kind") != std::string::npos);
  CHECK(tpu.find("'tpu'") != std::string::npos);
  // The rule: the same kind passes, another kind is refused naming both and the file.
  topo::Calibration cpu = old;
  cpu.file = "runs/lab/cal.yaml";
  CHECK_NOTHROW(topo::check_device_kind(cpu, "cpu"));
  try {
    topo::check_device_kind(cpu, "cuda");
    FAIL("a cpu calibration reached a cuda plan");
  } catch (const UserError& e) {
    const std::string m = e.what();
    CHECK(m.find("'runs/lab/cal.yaml'") != std::string::npos);
    CHECK(m.find("cpu devices") != std::string::npos);
    CHECK(m.find("cuda devices") != std::string::npos);
  }
  CHECK_NOTHROW(topo::check_device_kind(back, "cuda"));
  CHECK_THROWS_AS(topo::check_device_kind(back, "cpu"), UserError);
  // Several models of one job: each is named.
  topo::DeviceRecord two{"cuda", "A100-SXM4-40GB, H100-SXM", "", "", "", "", "", ""};
  CHECK(two.names() == std::vector<std::string>{"A100-SXM4-40GB", "H100-SXM"});
  CHECK(topo::DeviceRecord{}.names().empty());
}
