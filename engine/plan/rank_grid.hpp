// Rank grid: the bijection between a linear index and a coordinate on every axis
// (engine/schedule/axes.hpp), from an order string such as "tp-dp-pp": Megatron-LM's
// RankGenerator, the first name varying fastest; an axis the order does not name has degree 1.
// Pure and O(axes) per query; groups are enumerated without building the whole grid.
#pragma once

#include <string>
#include <vector>

#include "engine/schedule/axes.hpp"

namespace holmes::plan {

using schedule::Axis;
using schedule::AxisSet;
using schedule::Coords;

class RankGrid {
 public:
  // degrees: each axis's (>= 1; UserError naming the parallel degrees otherwise); order:
  // distinct axis names joined by '-', fastest first, naming every axis of degree > 1
  // (std::invalid_argument otherwise: a user's parallel.order goes through parse_order first).
  RankGrid(const schedule::AxisDegrees& degrees, const std::string& order);
  // The tensor x pipeline x data grid.
  RankGrid(int tp, int pp, int dp, const std::string& order)
      : RankGrid(schedule::AxisDegrees{{Axis::kTp, tp}, {Axis::kPp, pp}, {Axis::kDp, dp}}, order) {}

  int size() const { return size_.product(); }
  int degree(Axis axis) const { return size_[axis]; }
  const schedule::AxisDegrees& degrees() const { return size_; }
  const std::string& order() const { return order_text_; }

  schedule::Coords coords(int index) const;
  int index(const schedule::Coords& c) const;

  // The groups that span `axes` (RankGenerator.get_ranks): one per coordinate of the other
  // axes, numbered with the earliest of those in the order varying fastest; a group's members
  // are ordered the same way over `axes` (one axis: ascending in its coordinate). Every index
  // is in exactly one group of a set of axes.
  int group_count(AxisSet axes) const;
  std::vector<int> group(AxisSet axes, int g) const;
  std::vector<std::vector<int>> groups(AxisSet axes) const;
  // A group's position of the coordinate `c`: the index in group(axes, .) that holds it.
  int position(AxisSet axes, const schedule::Coords& c) const;

 private:
  // The coordinate on `axes` (in order_) of `value`, a mixed-radix number over them.
  void spread(const std::vector<Axis>& axes, int value, schedule::Coords& c) const;
  std::vector<Axis> of(AxisSet axes, bool inside) const;  // order_'s axes in (or outside) `axes`

  schedule::AxisDegrees size_;
  std::vector<Axis> order_;  // the named axes, fastest first, then the others (degree 1)
  schedule::AxisValues stride_;
  std::string order_text_;
};

// The axes of a user's rank order (parallel.order): tp, pp and dp once each joined by '-',
// fastest first; UserError naming the key, the value seen and the accepted form otherwise.
std::vector<Axis> parse_order(const std::string& order);

}  // namespace holmes::plan
