#include "engine/parallel/groups.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace holmes::parallel {

namespace {

// A group for one axis: of one member when size is 1, else over the given communicators,
// which must match the coordinate.
std::unique_ptr<Group> axis(const char* what, comm::ProcessGroup* host, comm::ProcessGroup* device, int rank,
                            int size, device::DeviceMemory& mem, CommClock& clock, const Group::Options& o) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument(fmt::format("ParallelGroups: {} rank {} of {} is not a valid coordinate", what, rank,
                                            size));
  if ((host == nullptr) != (size == 1))
    throw std::invalid_argument(fmt::format("ParallelGroups: {} degree {} but the group is {}", what, size,
                                            host == nullptr ? "missing" : "set"));
  if (host == nullptr) return std::make_unique<Group>();
  if (host->size() != size || host->rank() != rank)
    throw std::invalid_argument(fmt::format("ParallelGroups: {} group '{}' is rank {} of {}, the grid says {} of {}",
                                            what, host->name(), host->rank(), host->size(), rank, size));
  return std::make_unique<Group>(*host, device, mem, clock, o);
}

}  // namespace

ParallelGroups::ParallelGroups()
    : tp_(std::make_unique<Group>()), pp_(std::make_unique<Group>()), dp_(std::make_unique<Group>()),
      embedding_(std::make_unique<Group>()), outer_(std::make_unique<Group>()), outer_side_(std::make_unique<Group>()),
      pp_prev_(std::make_unique<Group>()), pp_next_(std::make_unique<Group>()) {}

ParallelGroups::ParallelGroups(const Coords& c, Comms host, Comms device, device::DeviceMemory& mem,
                               Group::Options o)
    : coords_(c) {
  tp_ = axis("tensor-parallel", host.tp, device.tp, c.tp_rank, c.tp_size, mem, clock_, o);
  pp_ = axis("pipeline", host.pp, device.pp, c.pp_stage, c.pp_size, mem, clock_, o);
  dp_ = axis("data-parallel", host.dp, device.dp, c.dp_rank, c.dp_size, mem, clock_, o);
  outer_ = axis("outer", host.outer, nullptr, c.replica, c.replicas, mem, clock_, o);
  outer_side_ = host.outer_side ? axis("outer side", host.outer_side, nullptr, c.replica, c.replicas, mem, clock_, o)
                                : std::make_unique<Group>();
  // Megatron's embedding group: the first stage (rank 0) and the last (rank 1) of a pipeline.
  const bool member = c.pp_size > 1 && (c.pp_stage == 0 || c.pp_stage == c.pp_size - 1);
  if (member) {
    const int want = c.pp_stage == 0 ? 0 : 1;
    if (host.embedding == nullptr || host.embedding->size() != 2 || host.embedding->rank() != want)
      throw std::invalid_argument(fmt::format("ParallelGroups: stage {} of {} needs the embedding group "
                                              "{{first, last}} as rank {}", c.pp_stage, c.pp_size, want));
    embedding_ = std::make_unique<Group>(*host.embedding, device.embedding, mem, clock_, o);
  } else {
    embedding_ = std::make_unique<Group>();
  }
  // The pp-hop groups: two members, the lower stage first.
  auto hop = [&](comm::ProcessGroup* g, int neighbour, int want) {
    if (g == nullptr) return std::make_unique<Group>();
    if (neighbour < 0 || neighbour >= c.pp_size || g->size() != 2 || g->rank() != want)
      throw std::invalid_argument(fmt::format("ParallelGroups: stage {} of {}: hop group '{}' to stage {} is rank {} "
                                              "of {}, needs rank {} of 2",
                                              c.pp_stage, c.pp_size, g->name(), neighbour, g->rank(), g->size(), want));
    return std::make_unique<Group>(*g, nullptr, mem, clock_, o);
  };
  pp_prev_ = hop(host.pp_prev, c.pp_stage - 1, 1);
  pp_next_ = hop(host.pp_next, c.pp_stage + 1, 0);
}

std::pair<Group*, int> ParallelGroups::pp_route(int peer_stage) {
  if (peer_stage == coords_.pp_stage - 1 && pp_prev_->size() > 1) return {pp_prev_.get(), 0};
  if (peer_stage == coords_.pp_stage + 1 && pp_next_->size() > 1) return {pp_next_.get(), 1};
  return {pp_.get(), peer_stage};
}

std::vector<Group*> ParallelGroups::pp_groups() {
  std::vector<Group*> out{pp_.get()};
  for (Group* g : {pp_prev_.get(), pp_next_.get()})
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

void ParallelGroups::sum_over_job(std::span<double> values) { sum_doubles({dp_.get(), tp_.get(), pp_.get()}, values); }

void ParallelGroups::sum_over_replicas(std::span<double> values) { sum_doubles({outer_.get()}, values); }

std::vector<std::string> ParallelGroups::describe() const {
  std::vector<std::string> out;
  for (const auto& [name, g] : {std::pair{"tp", tp_.get()}, {"pp", pp_.get()}, {"dp", dp_.get()},
                                {"embedding", embedding_.get()}, {"outer", outer_.get()},
                                {"outer side", outer_side_.get()}, {"pp hop to the stage before", pp_prev_.get()},
                                {"pp hop to the stage after", pp_next_.get()}})
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
