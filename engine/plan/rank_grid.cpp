#include "engine/plan/rank_grid.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "common/errors.hpp"

namespace holmes::plan {

std::vector<Axis> parse_order(const std::string& order) {
  std::vector<Axis> out;
  size_t start = 0;
  bool ok = true;
  while (ok) {
    const size_t dash = order.find('-', start);
    const auto axis = schedule::axis_named(order.substr(start, dash == std::string::npos ? dash : dash - start));
    ok = axis && *axis != Axis::kReplica && std::find(out.begin(), out.end(), *axis) == out.end();
    if (ok) out.push_back(*axis);
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  if (!ok || out.size() != 3)
    throw UserError(fmt::format("parallel.order = '{}' is not a rank order: expected tp, pp and dp once each "
                                "joined by '-', fastest-varying first (e.g. tp-dp-pp)", order));
  return out;
}

RankGrid::RankGrid(const schedule::AxisDegrees& degrees, const std::string& order)
    : size_(degrees), order_text_(order) {
  if (degrees[Axis::kTp] < 1 || degrees[Axis::kPp] < 1 || degrees[Axis::kDp] < 1)
    throw UserError(fmt::format("parallel degrees must be >= 1, got tensor={} pipeline={} data={}",
                                degrees[Axis::kTp], degrees[Axis::kPp], degrees[Axis::kDp]));
  size_t start = 0;
  for (;;) {
    const size_t dash = order.find('-', start);
    const auto axis = schedule::axis_named(order.substr(start, dash == std::string::npos ? dash : dash - start));
    if (!axis || std::find(order_.begin(), order_.end(), *axis) != order_.end())
      throw std::invalid_argument(fmt::format("RankGrid: order '{}' does not name distinct axes", order));
    order_.push_back(*axis);
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  for (Axis a : schedule::kAllAxes) {
    if (size_[a] < 1) throw std::invalid_argument(fmt::format("RankGrid: {} degree {}", schedule::axis_name(a), size_[a]));
    if (std::find(order_.begin(), order_.end(), a) != order_.end()) continue;
    if (size_[a] > 1)
      throw std::invalid_argument(fmt::format("RankGrid: order '{}' leaves out {} of degree {}", order,
                                              schedule::axis_name(a), size_[a]));
    order_.push_back(a);
  }
  int stride = 1;
  for (Axis a : order_) {
    stride_[a] = stride;
    stride *= size_[a];
  }
}

schedule::Coords RankGrid::coords(int index) const {
  schedule::Coords c;
  for (Axis a : order_) {
    c[a] = index % size_[a];
    index /= size_[a];
  }
  return c;
}

int RankGrid::index(const schedule::Coords& c) const {
  int i = 0;
  for (Axis a : order_) i += c[a] * stride_[a];
  return i;
}

std::vector<Axis> RankGrid::of(AxisSet axes, bool inside) const {
  std::vector<Axis> out;
  for (Axis a : order_)
    if (axes.contains(a) == inside) out.push_back(a);
  return out;
}

void RankGrid::spread(const std::vector<Axis>& axes, int value, schedule::Coords& c) const {
  for (Axis a : axes) {
    c[a] = value % size_[a];
    value /= size_[a];
  }
}

int RankGrid::group_count(AxisSet axes) const {
  int n = 1;
  for (Axis a : of(axes, false)) n *= size_[a];
  return n;
}

std::vector<int> RankGrid::group(AxisSet axes, int g) const {
  const std::vector<Axis> in = of(axes, true);
  schedule::Coords c;
  spread(of(axes, false), g, c);
  int members = 1;
  for (Axis a : in) members *= size_[a];
  std::vector<int> out(members);
  for (int k = 0; k < members; ++k) {
    spread(in, k, c);
    out[k] = index(c);
  }
  return out;
}

std::vector<std::vector<int>> RankGrid::groups(AxisSet axes) const {
  std::vector<std::vector<int>> out(group_count(axes));
  for (int g = 0; g < group_count(axes); ++g) out[g] = group(axes, g);
  return out;
}

int RankGrid::position(AxisSet axes, const schedule::Coords& c) const {
  int k = 0, radix = 1;
  for (Axis a : of(axes, true)) {
    k += c[a] * radix;
    radix *= size_[a];
  }
  return k;
}

}  // namespace holmes::plan
