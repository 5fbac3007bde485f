// Rank grid: the bijection between a linear index and (tp, pp, dp) coordinates given an
// order string such as "tp-dp-pp" (Megatron-LM convention: the first name varies fastest).
// Pure and O(1) per query; groups are enumerated without building the whole grid.
#pragma once

#include <array>
#include <string>
#include <vector>

namespace holmes::plan {

// Axis indices into Coords / RankGrid::size.
enum Axis { kTp = 0, kPp = 1, kDp = 2 };

struct Coords {
  int tp = 0;
  int pp = 0;
  int dp = 0;
  int operator[](int axis) const { return axis == kTp ? tp : axis == kPp ? pp : dp; }
  int& operator[](int axis) { return axis == kTp ? tp : axis == kPp ? pp : dp; }
  bool operator==(const Coords&) const = default;
};

class RankGrid {
 public:
  // order: three distinct names from {tp, pp, dp} joined by '-'; throws UserError otherwise
  // (message names parallel.order, the value seen and the accepted form).
  RankGrid(int tp, int pp, int dp, const std::string& order);

  int size() const { return size_[kTp] * size_[kPp] * size_[kDp]; }
  int degree(int axis) const { return size_[axis]; }
  const std::string& order() const { return order_text_; }

  Coords coords(int index) const;
  int index(const Coords& c) const;

  // Number of groups along `axis` (= size() / degree(axis)).
  int group_count(int axis) const { return size() / size_[axis]; }
  // Members of group g along `axis`, ascending in that axis' coordinate. Groups are numbered
  // by the remaining two coordinates in grid order, so group g holds index g's "row".
  std::vector<int> group(int axis, int g) const;
  // All groups along `axis`; each index appears in exactly one.
  std::vector<std::vector<int>> groups(int axis) const;

 private:
  std::array<int, 3> size_{};
  std::array<int, 3> order_{};   // order_[k] = axis varying k-th fastest
  std::array<int, 3> stride_{};  // stride_[axis] in the linear index
  std::string order_text_;
};

// Parses "tp-dp-pp" style order strings; throws UserError on anything else.
std::array<int, 3> parse_order(const std::string& order);

}  // namespace holmes::plan
