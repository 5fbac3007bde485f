#include "engine/parallel/dist_comm.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

namespace holmes::parallel {

namespace {

void check_group(const char* what, const comm::ProcessGroup* g, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument(fmt::format("ParallelContext: {} rank {} of {} is not a valid coordinate", what,
                                            rank, size));
  if ((g == nullptr) != (size == 1))
    throw std::invalid_argument(fmt::format("ParallelContext: {} degree {} but the group is {}", what, size,
                                            g == nullptr ? "missing" : "set"));
  if (g != nullptr && (g->size() != size || g->rank() != rank))
    throw std::invalid_argument(fmt::format("ParallelContext: {} group '{}' is rank {} of {}, the context says {} of {}",
                                            what, g->name(), g->rank(), g->size(), rank, size));
}

}  // namespace

void check_context(const ParallelContext& ctx) {
  check_group("tensor-parallel", ctx.tp, ctx.tp_rank, ctx.tp_size);
  check_group("pipeline", ctx.pp, ctx.pp_stage, ctx.pp_size);
  check_group("data-parallel", ctx.dp, ctx.dp_rank, ctx.dp_size);
  if (ctx.pp_size > 1) {
    const int want = ctx.pp_stage == 0 ? 0 : 1;
    const bool member = ctx.pp_stage == 0 || ctx.pp_stage == ctx.pp_size - 1;
    if (member && (ctx.embedding == nullptr || ctx.embedding->size() != 2 || ctx.embedding->rank() != want))
      throw std::invalid_argument(fmt::format("ParallelContext: stage {} of {} needs the embedding group "
                                              "{{first, last}} as rank {}", ctx.pp_stage, ctx.pp_size, want));
  }
}

template <class F>
void GroupTensorParallel::timed(F&& op) {
  if (queued_ != nullptr)
    clock_.time_queued(*queued_, stream_, std::forward<F>(op));
  else
    clock_.time(std::forward<F>(op));
}

void GroupTensorParallel::all_reduce_sum(float* data, size_t count) {
  timed([&] { group_.all_reduce({data, count}, comm::ReduceOp::kSum, {.stream = stream_}); });
}

void GroupTensorParallel::all_reduce_max(float* data, size_t count) {
  timed([&] { group_.all_reduce({data, count}, comm::ReduceOp::kMax, {.stream = stream_}); });
}

void sum_doubles(std::span<double> values, std::span<comm::ProcessGroup* const> groups, CommClock& clock) {
  std::vector<float> wire(2 * values.size());
  for (comm::ProcessGroup* g : groups) {
    if (g == nullptr) continue;
    for (size_t i = 0; i < values.size(); ++i) {
      wire[2 * i] = static_cast<float>(values[i]);
      wire[2 * i + 1] = static_cast<float>(values[i] - static_cast<double>(wire[2 * i]));
    }
    clock.time([&] { g->all_reduce(wire, comm::ReduceOp::kSum); });
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<double>(wire[2 * i]) + static_cast<double>(wire[2 * i + 1]);
  }
}

}  // namespace holmes::parallel
