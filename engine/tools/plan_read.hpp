// A plan read back from its JSON (--plan-only --format json, a run's plan.json), for the run
// report's plan picture: the fields docs/plan-format.md lists, checked for the consistency
// the picture relies on (rank i is entry i, nodes, stages and group members in range).
#pragma once

#include <string>

#include "engine/plan/plan.hpp"

namespace holmes::tools {

// Throws UserError naming `source` and what is wrong (not JSON, a missing or mistyped key, a
// rank outside the plan) when the text is not a holmes-plan/1 plan.
plan::Plan read_plan_json(const std::string& text, const std::string& source);

}  // namespace holmes::tools
