// job.device on this machine (runtime::training_device): auto takes the GPU only where one is
// usable and says why when not; cuda without one is refused naming job.device.
#include <catch2/catch.hpp>

#include <string>

#include "common/errors.hpp"
#include "engine/runtime/cluster_view.hpp"

using namespace holmes;

TEST_CASE("job.device auto resolves to cuda only with a usable GPU, else cpu with the reason", "[runtime]") {
  const std::string why = backends::unusable(backends::Device::kCuda);
  std::string note;
  const backends::Device resolved = runtime::training_device(spec::Device::kAuto, &note);
  if (why.empty()) {
    CHECK(resolved == backends::Device::kCuda);
    CHECK(note.empty());
    CHECK(runtime::training_device(spec::Device::kCuda) == backends::Device::kCuda);
  } else {
    CHECK(resolved == backends::Device::kCpu);
    CHECK_THAT(note, Catch::Contains("job.device auto") && Catch::Contains(why) &&
                         Catch::Contains("training on the CPU"));
    CHECK_THROWS_AS(runtime::training_device(spec::Device::kCuda), UserError);
    try {
      runtime::training_device(spec::Device::kCuda);
    } catch (const UserError& e) {
      CHECK_THAT(e.what(), Catch::Contains("job.device: 'cuda'") && Catch::Contains(why) &&
                               Catch::Contains("accepted here: cpu, auto"));
    }
  }
  std::string untouched;
  CHECK(runtime::training_device(spec::Device::kCpu, &untouched) == backends::Device::kCpu);
  CHECK(untouched.empty());
}
