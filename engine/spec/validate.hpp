// Cross-field checks of a job spec whose single fields are already valid.
#pragma once

#include <string>
#include <vector>

#include "engine/spec/errors.hpp"
#include "engine/spec/load.hpp"

namespace holmes::spec {

// Appends one issue per broken rule (all of them, not just the first). May fill derived
// values (a partition list fixes an `auto` pipeline degree).
void validate(LoadedSpec& loaded, const std::string& source, std::vector<ConfigIssue>& issues);

}  // namespace holmes::spec
