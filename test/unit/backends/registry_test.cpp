// job.device resolution: auto takes the GPU only where one is usable, and says why when not.
#include <catch2/catch.hpp>

#include <string>

#include "backends/backends.hpp"

using namespace holmes::backends;
using namespace holmes::model;

TEST_CASE("job.device auto resolves to cuda only with a usable GPU, else cpu with the reason", "[model]") {
  std::string why;
  const bool gpu = local_gpus(&why).count > 0;
  std::string note;
  const std::string resolved = resolve_device("auto", &note);
  if (gpu) {
    CHECK(resolved == "cuda");
    CHECK(note.empty());
  } else {
    CHECK(resolved == "cpu");
    CHECK_THAT(note, Catch::Contains("job.device auto") && Catch::Contains(why) &&
                         Catch::Contains("training on the CPU"));
    CHECK(make_backend("auto").device == "cpu");
  }
  std::string untouched;
  CHECK(resolve_device("cpu", &untouched) == "cpu");
  CHECK(resolve_device("cuda", &untouched) == "cuda");  // checked by require_training_device
  CHECK(untouched.empty());
}
