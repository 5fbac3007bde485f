#include "engine/schedule/axes.hpp"

#include <iterator>

namespace holmes::schedule {

const char* axis_name(Axis axis) {
  switch (axis) {
    case Axis::kTp: return "tp";
    case Axis::kPp: return "pp";
    case Axis::kDp: return "dp";
    case Axis::kReplica: return "replica";
  }
  return "?";
}

std::optional<Axis> axis_named(std::string_view name) {
  for (Axis a : kAllAxes)
    if (name == axis_name(a)) return a;
  return std::nullopt;
}

std::string AxisSet::name() const {
  std::string out;
  for (Axis a : kAllAxes)
    if (contains(a)) out += (out.empty() ? "" : "+") + std::string(axis_name(a));
  return out;
}

std::string to_string(GroupKind kind) {
  switch (kind.purpose) {
    case Purpose::kEmbedding: return "embedding";
    case Purpose::kHop: return "pp-hop";
    case Purpose::kSide: return to_string(GroupKind{kind.axes}) + "-side";
    case Purpose::kAxes: break;
  }
  if (kind.axes == AxisSet::all()) return "world";
  if (kind.axes == AxisSet{Axis::kReplica}) return "outer";
  return kind.axes.name();
}

int listing_order(GroupKind kind) {
  const int n = static_cast<int>(std::size(kGroupKinds));
  for (int i = 0; i < n; ++i)
    if (kGroupKinds[i] == kind) return i;
  return n;
}

}  // namespace holmes::schedule
