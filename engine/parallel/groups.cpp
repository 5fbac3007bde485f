#include "engine/parallel/groups.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <tuple>

namespace holmes::parallel {

namespace {

using schedule::Axis;
using schedule::GroupKind;
using schedule::Purpose;

// The group rank `comms` must have at `place`, or -1 where this rank cannot be a member.
int expected_rank(const GroupComms& c, const schedule::Place& place) {
  const int pp = place.degree(Axis::kPp), stage = place[Axis::kPp];
  switch (c.kind.purpose) {
    case Purpose::kEmbedding: return pp > 1 && (stage == 0 || stage == pp - 1) ? (stage == 0 ? 0 : 1) : -1;
    case Purpose::kHop: return c.host->rank();  // either end; its neighbour is checked below
    case Purpose::kAxes:
    case Purpose::kSide: break;
  }
  // A group over one axis is ordered by that axis' coordinate.
  for (Axis a : schedule::kAllAxes)
    if (c.kind.axes == schedule::AxisSet{a}) return place[a];
  return -1;
}

// The members a group of `kind` has at `place` (0: not a group this rank can hold).
int expected_size(GroupKind kind, const schedule::Place& place) {
  if (kind.purpose == Purpose::kEmbedding || kind.purpose == Purpose::kHop) return 2;
  for (Axis a : schedule::kAllAxes)
    if (kind.axes == schedule::AxisSet{a}) return place.degree(a);
  return 0;
}

}  // namespace

ParallelGroups::ParallelGroups()
    : hop_prev_(std::make_unique<Group>()), hop_next_(std::make_unique<Group>()) {}

ParallelGroups::ParallelGroups(const schedule::Place& place, std::span<const GroupComms> comms,
                               device::DeviceMemory& mem, Group::Options o)
    : place_(place), mem_(&mem), options_(o), hop_prev_(std::make_unique<Group>()), hop_next_(std::make_unique<Group>()) {
  for (Axis a : schedule::kAllAxes)
    if (place[a] < 0 || place[a] >= place.degree(a))
      throw std::invalid_argument(fmt::format("ParallelGroups: {} coordinate {} of {} is not valid",
                                              schedule::axis_name(a), place[a], place.degree(a)));
  for (const GroupComms& c : comms) {
    const std::string what = schedule::to_string(c.kind);
    if (c.host == nullptr) throw std::invalid_argument(fmt::format("ParallelGroups: {} group without a communicator", what));
    const int want = expected_rank(c, place), size = expected_size(c.kind, place);
    if (want < 0 || c.host->size() != size || c.host->rank() != want)
      throw std::invalid_argument(fmt::format("ParallelGroups: {} group '{}' is rank {} of {}, this rank's place says "
                                              "{} of {}", what, c.host->name(), c.host->rank(), c.host->size(), want,
                                              size));
    if (c.kind.purpose == Purpose::kHop) {  // two members, the lower stage first
      const int neighbour = place[Axis::kPp] + (want == 0 ? 1 : -1);
      if (neighbour < 0 || neighbour >= place.degree(Axis::kPp))
        throw std::invalid_argument(fmt::format("ParallelGroups: stage {} of {}: hop group '{}' to stage {}",
                                                place[Axis::kPp], place.degree(Axis::kPp), c.host->name(), neighbour));
      std::unique_ptr<Group>& slot = want == 0 ? hop_next_ : hop_prev_;
      if (slot->size() > 1) throw std::invalid_argument(fmt::format("ParallelGroups: two hop groups to stage {}", neighbour));
      slot = std::make_unique<Group>(*c.host, nullptr, mem, clock_, o);
      continue;
    }
    if (groups_.count(c.kind)) throw std::invalid_argument(fmt::format("ParallelGroups: two {} groups", what));
    groups_[c.kind] = std::make_unique<Group>(*c.host, c.device, mem, clock_, o);
  }
  for (Axis a : schedule::kAllAxes)
    if (place.degree(a) > 1 && !groups_.count(GroupKind{a}))
      throw std::invalid_argument(fmt::format("ParallelGroups: {} degree {} but the group is missing",
                                              schedule::axis_name(a), place.degree(a)));
  if (expected_rank(GroupComms{schedule::kEmbeddingGroup}, place) >= 0 && !groups_.count(schedule::kEmbeddingGroup))
    throw std::invalid_argument(fmt::format("ParallelGroups: stage {} of {} needs the embedding group {{first, last}}",
                                            place[Axis::kPp], place.degree(Axis::kPp)));
}

Group& ParallelGroups::group(GroupKind kind) {
  std::unique_ptr<Group>& g = groups_[kind];
  if (!g) g = std::make_unique<Group>();
  return *g;
}

std::vector<std::unique_ptr<Group>> ParallelGroups::replace_replica_groups(const schedule::Place& place,
                                                                           comm::ProcessGroup* outer) {
  for (Axis a : schedule::kAllAxes)
    if (a != Axis::kReplica && (place[a] != place_[a] || place.degree(a) != place_.degree(a)))
      throw std::invalid_argument(fmt::format("ParallelGroups: a new place moves the {} coordinate", schedule::axis_name(a)));
  const int n = place.degree(Axis::kReplica);
  if ((n > 1) != (outer != nullptr) || (outer && (outer->size() != n || outer->rank() != place[Axis::kReplica])) ||
      mem_ == nullptr)
    throw std::invalid_argument(fmt::format("ParallelGroups: replica {} of {} with an outer group of {} members",
                                            place[Axis::kReplica], n, outer ? outer->size() : 1));
  std::vector<std::unique_ptr<Group>> old;
  for (GroupKind kind : {GroupKind{Axis::kReplica}, GroupKind{Axis::kReplica, Purpose::kSide}}) {
    auto it = groups_.find(kind);
    if (it == groups_.end()) continue;
    old.push_back(std::move(it->second));
    groups_.erase(it);
  }
  place_ = place;
  if (outer) groups_[GroupKind{Axis::kReplica}] = std::make_unique<Group>(*outer, nullptr, *mem_, clock_, options_);
  return old;
}

std::pair<Group*, int> ParallelGroups::pp_route(int peer_stage) {
  const int stage = place_[Axis::kPp];
  if (peer_stage == stage - 1 && hop_prev_->size() > 1) return {hop_prev_.get(), 0};
  if (peer_stage == stage + 1 && hop_next_->size() > 1) return {hop_next_.get(), 1};
  return {&group(Axis::kPp), peer_stage};
}

std::vector<Group*> ParallelGroups::pp_groups() {
  std::vector<Group*> out{&group(Axis::kPp)};
  for (Group* g : {hop_prev_.get(), hop_next_.get()})
    if (g->size() > 1) out.push_back(g);
  return out;
}

namespace {

// A double travels as two floats: the high part and the rounding rest (see sum_over_job).
void to_wire(std::span<const double> values, std::span<float> wire) {
  for (size_t i = 0; i < values.size(); ++i) {
    wire[2 * i] = static_cast<float>(values[i]);
    wire[2 * i + 1] = static_cast<float>(values[i] - static_cast<double>(wire[2 * i]));
  }
}

void from_wire(std::span<const float> wire, std::span<double> values) {
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<double>(wire[2 * i]) + static_cast<double>(wire[2 * i + 1]);
}

// values summed over each group in turn, each double as two floats.
void sum_doubles(std::initializer_list<Group*> groups, std::span<double> values) {
  std::vector<float> wire(2 * values.size());
  for (Group* g : groups) {
    if (g->size() == 1) continue;
    to_wire(values, wire);
    g->all_reduce(Buf::f32(wire.data(), wire.size()), comm::ReduceOp::kSum);  // host memory: the host group
    from_wire(wire, values);
  }
}

}  // namespace

// The order of the groups is part of the result's bits: dp, tp, pp, as it always was.
void ParallelGroups::sum_over_job(std::span<double> values) {
  sum_doubles({&group(Axis::kDp), &group(Axis::kTp), &group(Axis::kPp)}, values);
}

void ParallelGroups::sum_over_replicas(std::span<double> values) { sum_doubles({&group(Axis::kReplica)}, values); }

std::vector<std::string> ParallelGroups::describe() const {
  // In listing order (tp, pp, dp, embedding, world, outer, then the side groups), then the hops.
  std::vector<std::tuple<int, std::string, const Group*>> named;
  for (const auto& [kind, g] : groups_)
    named.emplace_back(schedule::listing_order(kind),
                       kind.purpose == Purpose::kSide ? schedule::to_string(GroupKind{kind.axes}) + " side"
                                                      : schedule::to_string(kind),
                       g.get());
  std::stable_sort(named.begin(), named.end(),
                   [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
  const int last = static_cast<int>(std::size(schedule::kGroupKinds)) + 1;
  named.emplace_back(last, "pp hop to the stage before", hop_prev_.get());
  named.emplace_back(last, "pp hop to the stage after", hop_next_.get());
  std::vector<std::string> out;
  for (const auto& [order, name, g] : named)
    if (g->size() > 1)
      out.push_back(fmt::format("groups: {} '{}' ({} members): {}", name, g->name(), g->size(), g->transport()));
  return out;
}

void GroupTensorParallel::all_reduce_sum(float* data, size_t count) {
  tp_.all_reduce(Buf::f32(data, count), comm::ReduceOp::kSum);
}

void GroupTensorParallel::all_reduce_max(float* data, size_t count) {
  tp_.all_reduce(Buf::f32(data, count), comm::ReduceOp::kMax);
}

void GroupTensorParallel::all_reduce_sum_bf16(void* data, size_t count) {
  tp_.all_reduce(Buf{data, count, comm::DType::kBf16}, comm::ReduceOp::kSum);
}

}  // namespace holmes::parallel
