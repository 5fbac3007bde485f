#include "engine/plan/rank_grid.hpp"

#include <fmt/format.h>

#include "common/errors.hpp"

namespace holmes::plan {

namespace {

int axis_of(const std::string& name) {
  if (name == "tp") return kTp;
  if (name == "pp") return kPp;
  if (name == "dp") return kDp;
  return -1;
}

}  // namespace

std::array<int, 3> parse_order(const std::string& order) {
  std::array<int, 3> out{-1, -1, -1};
  bool seen[3] = {false, false, false};
  size_t start = 0;
  int k = 0;
  bool ok = true;
  while (ok && k < 3) {
    size_t dash = order.find('-', start);
    std::string part = order.substr(start, dash == std::string::npos ? std::string::npos : dash - start);
    int axis = axis_of(part);
    if (axis < 0 || seen[axis]) ok = false;
    else {
      seen[axis] = true;
      out[k++] = axis;
    }
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  if (!ok || k != 3 || order.size() != 8)
    throw UserError(fmt::format("parallel.order = '{}' is not a rank order: expected tp, pp and dp once each "
                                "joined by '-', fastest-varying first (e.g. tp-dp-pp)", order));
  return out;
}

RankGrid::RankGrid(int tp, int pp, int dp, const std::string& order) : order_text_(order) {
  if (tp < 1 || pp < 1 || dp < 1)
    throw UserError(fmt::format("parallel degrees must be >= 1, got tensor={} pipeline={} data={}", tp, pp, dp));
  size_ = {tp, pp, dp};
  order_ = parse_order(order);
  int stride = 1;
  for (int k = 0; k < 3; ++k) {
    stride_[order_[k]] = stride;
    stride *= size_[order_[k]];
  }
}

Coords RankGrid::coords(int index) const {
  Coords c;
  for (int k = 0; k < 3; ++k) {
    int axis = order_[k];
    c[axis] = index % size_[axis];
    index /= size_[axis];
  }
  return c;
}

int RankGrid::index(const Coords& c) const {
  return c.tp * stride_[kTp] + c.pp * stride_[kPp] + c.dp * stride_[kDp];
}

std::vector<int> RankGrid::group(int axis, int g) const {
  // g enumerates the other two axes, faster one first (in grid order).
  int a = -1, b = -1;
  for (int k = 0; k < 3; ++k) {
    if (order_[k] == axis) continue;
    (a < 0 ? a : b) = order_[k];
  }
  Coords c;
  c[a] = g % size_[a];
  c[b] = g / size_[a];
  std::vector<int> members(size_[axis]);
  for (int i = 0; i < size_[axis]; ++i) {
    c[axis] = i;
    members[i] = index(c);
  }
  return members;
}

std::vector<std::vector<int>> RankGrid::groups(int axis) const {
  std::vector<std::vector<int>> out(group_count(axis));
  for (int g = 0; g < group_count(axis); ++g) out[g] = group(axis, g);
  return out;
}

}  // namespace holmes::plan
