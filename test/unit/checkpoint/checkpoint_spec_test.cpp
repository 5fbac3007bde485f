// The checkpoint keys of the job spec: checkpoint.resume and checkpoint.weights_only.
#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "engine/spec/load.hpp"

using namespace holmes;

namespace {

// The message of the ConfigError that loading the default job with `sets` raises ("" = none).
std::string spec_error(const std::vector<std::string>& sets) {
  try {
    spec::load_job_spec("", sets);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("checkpoint spec: resume takes auto or none or a path and weights_only a boolean") {
  CHECK(spec::load_job_spec("", {}).spec.checkpoint.resume == spec::ResumeMode::kNone);
  CHECK_FALSE(spec::load_job_spec("", {}).spec.checkpoint.weights_only);
  auto s = spec::load_job_spec("", {"checkpoint.resume=runs/a b/step-00000010", "checkpoint.weights_only=true"});
  CHECK(s.spec.checkpoint.resume == spec::ResumeMode::kPath);
  CHECK(s.spec.checkpoint.resume_path == "runs/a b/step-00000010");
  CHECK(s.spec.checkpoint.weights_only);
  CHECK(spec::load_job_spec("", {"checkpoint.resume=auto"}).spec.checkpoint.resume == spec::ResumeMode::kAuto);
  CHECK_THAT(spec::print_resolved(s), Catch::Contains("resume: \"runs/a b/step-00000010\"") &&
                                          Catch::Contains("weights_only: true"));
}

TEST_CASE("checkpoint spec: bad values name the key and the value and what is accepted") {
  CHECK_THAT(spec_error({"checkpoint.resume="}),
             Catch::Contains("checkpoint.resume") && Catch::Contains("auto, none or a checkpoint folder"));
  CHECK_THAT(spec_error({"checkpoint.weights_only=maybe"}),
             Catch::Contains("checkpoint.weights_only") && Catch::Contains("'maybe'") &&
                 Catch::Contains("true or false"));
  CHECK_THAT(spec_error({"checkpoint.weights_only=true"}),
             Catch::Contains("checkpoint.weights_only") && Catch::Contains("checkpoint.resume = none"));
}
