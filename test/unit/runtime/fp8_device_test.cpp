// train.precision: fp8 and the device (runtime::fp8_device_problem): accepted on GPUs with FP8
// tensor cores (compute capability 8.9 and newer), refused on older GPUs and on the CPU with
// the device named, what was seen and what is accepted; check_precision_device applies the
// rule to this machine.
#include <catch2/catch.hpp>

#include <string>

#include "common/errors.hpp"
#include "engine/runtime/cluster_view.hpp"

using namespace holmes;

namespace {

backends::GpuSummary gpu(const char* name, int major, int minor) {
  backends::GpuSummary g;
  g.count = 1;
  g.name = name;
  g.cc_major = major;
  g.cc_minor = minor;
  return g;
}

}  // namespace

TEST_CASE("fp8 is accepted on compute capability 8.9 and newer, refused below naming the GPU", "[runtime]") {
  const auto cuda = backends::Device::kCuda;
  CHECK(runtime::fp8_device_problem(cuda, gpu("NVIDIA H100 80GB HBM3", 9, 0), "").empty());
  CHECK(runtime::fp8_device_problem(cuda, gpu("NVIDIA H200", 9, 0), "").empty());
  CHECK(runtime::fp8_device_problem(cuda, gpu("NVIDIA L40S", 8, 9), "").empty());
  CHECK(runtime::fp8_device_problem(cuda, gpu("NVIDIA B200", 10, 0), "").empty());
  for (const auto& old : {gpu("NVIDIA A100-SXM4-80GB", 8, 0), gpu("NVIDIA A10", 8, 6), gpu("Tesla V100", 7, 0)}) {
    const std::string why = runtime::fp8_device_problem(cuda, old, "");
    INFO(why);
    CHECK_THAT(why, Catch::Contains("train.precision: 'fp8'") && Catch::Contains(old.name) &&
                        Catch::Contains("compute capability " + std::to_string(old.cc_major) + "." +
                                        std::to_string(old.cc_minor)) &&
                        Catch::Contains("8.9 or newer") && Catch::Contains("accepted here: auto, bf16, fp32"));
  }
}

TEST_CASE("fp8 on the CPU is refused with the reason the job trains there", "[runtime]") {
  const std::string why =
      runtime::fp8_device_problem(backends::Device::kCpu, backends::GpuSummary{}, "job.device: cpu");
  CHECK_THAT(why, Catch::Contains("train.precision: 'fp8'") && Catch::Contains("trains on the CPU (job.device: cpu)") &&
                      Catch::Contains("accepted here: auto, fp32"));
}

TEST_CASE("check_precision_device: this machine, before any work", "[runtime]") {
  spec::JobSpec s;
  s.train.precision = spec::Precision::kBf16;
  CHECK_NOTHROW(runtime::check_precision_device(s));  // only fp8 is checked here
  s.train.precision = spec::Precision::kFp8;
  s.job.device = spec::Device::kCpu;
  try {
    runtime::check_precision_device(s);
    FAIL("fp8 on job.device cpu was accepted");
  } catch (const UserError& e) {
    CHECK_THAT(e.what(), Catch::Contains("trains on the CPU (job.device: cpu)"));
  }
  s.job.device = spec::Device::kAuto;
  const auto gpus = backends::local_gpus();
  const bool fp8_gpu = gpus.count > 0 && (gpus.cc_major > 8 || (gpus.cc_major == 8 && gpus.cc_minor >= 9));
  if (fp8_gpu) {
    CHECK_NOTHROW(runtime::check_precision_device(s));
  } else {
    CHECK_THROWS_AS(runtime::check_precision_device(s), UserError);
  }
}
