// Cross-field checks of a job spec whose single fields are already valid.
#pragma once

#include <string>
#include <vector>

#include "common/errors.hpp"
#include "engine/spec/load.hpp"

namespace holmes::spec {

// One broken rule that ties keys together: the key it is reported on and what is wrong.
struct Problem {
  std::string key;
  std::string message;
};

// The rules between the model, parallel and train keys, each written once: validate() reports
// them with file and line, make_plan (a pure function that tests also call with specs that
// never came from a file) refuses the first. Single fields are assumed in range.
std::vector<Problem> cross_field_problems(const JobSpec& spec);

// Appends one issue per broken rule (all of them, not just the first). May fill derived
// values (a partition list fixes an `auto` pipeline degree).
void validate(LoadedSpec& loaded, const std::string& source, std::vector<ConfigIssue>& issues);

}  // namespace holmes::spec
