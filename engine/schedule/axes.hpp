// The parallel axes, as data: one enumeration that the planner (its rank grid and groups), the
// start-up (which communicator serves which axes) and the executor (its groups, its place in
// the job) all read, so that adding an axis is a line here, the planner's rule for its degree
// and placement, its traffic in the cost model and its users (docs/extending.md, "Add an axis").
//   tp       tensor parallelism: a layer's matrices split over the members
//   pp       pipeline parallelism: the layers split into stages
//   dp       data parallelism: the batch split, gradients reduced (a sync job's replicas
//            included, unless it is elastic)
//   replica  whole copies of a tp x pp x dp job: diloco's, kept in step by an outer sync, and
//            an elastic sync job's (HSDP), whose owned gradient shards are summed across them
//            every step
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace holmes::schedule {

enum class Axis { kTp, kPp, kDp, kReplica };
inline constexpr int kAxes = 4;
inline constexpr std::array<Axis, kAxes> kAllAxes = {Axis::kTp, Axis::kPp, Axis::kDp, Axis::kReplica};

const char* axis_name(Axis axis);  // "tp", "pp", "dp", "replica"
std::optional<Axis> axis_named(std::string_view name);

// A set of axes (which axes a group spans), iterated in enumeration order.
class AxisSet {
 public:
  constexpr AxisSet() = default;
  constexpr AxisSet(Axis a) : bits_(bit(a)) {}  // NOLINT: one axis is a set of one
  constexpr AxisSet(std::initializer_list<Axis> axes) {
    for (Axis a : axes) bits_ |= bit(a);
  }
  static constexpr AxisSet all() {
    AxisSet s;
    for (Axis a : kAllAxes) s.bits_ |= bit(a);
    return s;
  }
  constexpr AxisSet& insert(Axis a) {
    bits_ |= bit(a);
    return *this;
  }
  constexpr bool contains(Axis a) const { return (bits_ & bit(a)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr int size() const {
    int n = 0;
    for (Axis a : kAllAxes) n += contains(a) ? 1 : 0;
    return n;
  }
  constexpr bool operator==(const AxisSet&) const = default;
  constexpr bool operator<(const AxisSet& o) const { return bits_ < o.bits_; }
  // "tp", "tp+dp" (enumeration order); "" for the empty set.
  std::string name() const;

 private:
  static constexpr uint32_t bit(Axis a) { return uint32_t{1} << static_cast<int>(a); }
  uint32_t bits_ = 0;
};

// One number per axis: a rank's coordinate on each (0 on an axis the job does not split), or
// each axis's degree (1 there).
struct AxisValues {
  std::array<int, kAxes> v{};
  constexpr int operator[](Axis a) const { return v[static_cast<int>(a)]; }
  constexpr int& operator[](Axis a) { return v[static_cast<int>(a)]; }
  bool operator==(const AxisValues&) const = default;
};
using Coords = AxisValues;

// Each axis's degree: 1 but those given.
struct AxisDegrees : AxisValues {
  AxisDegrees() { v.fill(1); }
  AxisDegrees(std::initializer_list<std::pair<Axis, int>> given) : AxisDegrees() {
    for (const auto& [a, d] : given) (*this)[a] = d;
  }
  int product() const {
    int n = 1;
    for (int d : v) n *= d;
    return n;
  }
};

// Where one rank sits in the job: its coordinate and the degree of every axis.
struct Place {
  Coords at;
  AxisDegrees size;
  int operator[](Axis a) const { return at[a]; }
  int degree(Axis a) const { return size[a]; }
  bool first(Axis a) const { return at[a] == 0; }
  bool last(Axis a) const { return at[a] == size[a] - 1; }
  // Where this rank's batches come from: its data-parallel rank among every replica's.
  int data_rank() const { return at[Axis::kReplica] * size[Axis::kDp] + at[Axis::kDp]; }
  int data_size() const { return size[Axis::kReplica] * size[Axis::kDp]; }
  bool operator==(const Place&) const = default;
};

// A group's kind: the axes it spans and what it is for:
//   kAxes       the ranks that differ only on `axes`, ordered as the rank grid orders them
//               (tp, pp, dp; replica: the outer group of diloco or elastic sync); every
//               axis: the job's world group, in rank order
//   kEmbedding  the first and the last member of a pp group (the tied embedding's sum)
//   kHop        two neighbouring members of a pp group, the lower stage first: one hop of a
//               pipeline on Ethernet that stays inside an RDMA island, in a plan of TCP groups
//   kSide       a second communicator of a kAxes group's members, for traffic that must not
//               queue behind the group's own (diloco's exchange beside the inner steps);
//               start-up makes it, plans do not list it
enum class Purpose { kAxes, kEmbedding, kHop, kSide };
struct GroupKind {
  AxisSet axes;
  Purpose purpose = Purpose::kAxes;
  constexpr bool operator==(const GroupKind&) const = default;
  constexpr bool operator<(const GroupKind& o) const {
    return purpose != o.purpose ? purpose < o.purpose : axes < o.axes;
  }
};
// The kinds the planner builds, in the order listings show them. A new axis adds its group
// here and in the planner's build_groups; start-up and the executor find groups by kind.
inline constexpr GroupKind kTpGroup{Axis::kTp}, kPpGroup{Axis::kPp}, kDpGroup{Axis::kDp},
    kEmbeddingGroup{Axis::kPp, Purpose::kEmbedding}, kWorldGroup{AxisSet::all()}, kOuterGroup{Axis::kReplica},
    kHopGroup{Axis::kPp, Purpose::kHop};
inline constexpr GroupKind kGroupKinds[] = {kTpGroup,    kPpGroup,    kDpGroup, kEmbeddingGroup,
                                            kWorldGroup, kOuterGroup, kHopGroup};
// "tp", "pp", "dp", "embedding", "world", "outer", "pp-hop"; other sets of axes "tp+dp", a
// side communicator "<its group's kind>-side".
std::string to_string(GroupKind kind);
int listing_order(GroupKind kind);  // its index in kGroupKinds (past them: after them)

}  // namespace holmes::schedule
