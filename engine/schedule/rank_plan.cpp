#include "engine/schedule/rank_plan.hpp"

#include <algorithm>

namespace holmes::schedule {

bool RankPlan::split_backward() const {
  return std::any_of(steps.begin(), steps.end(), [](const PipeStep& s) { return s.kind == PipeOpKind::kWeights; });
}

int RankPlan::virtual_stage(int chunk) const {
  return schedule::virtual_stage(place.degree(Axis::kPp), place[Axis::kPp], chunk);
}

}  // namespace holmes::schedule
