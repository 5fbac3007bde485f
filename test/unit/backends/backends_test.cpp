// Which backends this build and machine can train on, and making one.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "backends/backends.hpp"

using namespace holmes::backends;

TEST_CASE("the CPU backend is always usable, CUDA exactly when a GPU is (with the reason when not)", "[backends]") {
  CHECK(unusable(Device::kCpu).empty());
  CHECK(make_backend(Device::kCpu).device == "cpu");
  std::string why;
  const bool gpu = local_gpus(&why).count > 0;
  const std::string cuda = unusable(Device::kCuda);
  if (gpu) {
    CHECK(cuda.empty());
  } else {
    REQUIRE_FALSE(cuda.empty());
    CHECK((cuda == why || cuda.find("without the CUDA toolkit") != std::string::npos));
    CHECK_THROWS_AS(make_backend(Device::kCuda), std::invalid_argument);
  }
}
