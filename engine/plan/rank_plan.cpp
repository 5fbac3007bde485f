#include "engine/plan/rank_plan.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace holmes::plan {

schedule::PipeSchedule pipe_schedule(spec::Schedule schedule) {
  switch (schedule) {
    case spec::Schedule::k1f1b: return schedule::PipeSchedule::k1f1b;
    case spec::Schedule::kZbH1: return schedule::PipeSchedule::kZbH1;
    case spec::Schedule::kInterleaved: return schedule::PipeSchedule::kInterleaved;
    case spec::Schedule::kAuto: break;
  }
  throw std::invalid_argument("pipe_schedule: parallel.schedule auto is the planner's to resolve");
}

schedule::RankPlan rank_plan(const Plan& plan, int rank) {
  if (rank < 0 || rank >= static_cast<int>(plan.ranks.size()))
    throw std::invalid_argument(fmt::format("rank_plan: rank {} of a plan of {} ranks", rank, plan.ranks.size()));
  const RankInfo& me = plan.ranks[rank];
  schedule::RankPlan rp;
  rp.rank = rank;
  rp.place.at = me.at;
  rp.place.size = schedule::AxisDegrees{{Axis::kTp, plan.tp}, {Axis::kPp, plan.pp}, {Axis::kDp, plan.dp}};
  // Sync replicas are part of the data-parallel degree unless elastic; diloco's train apart.
  const bool apart = plan.replicas.apart();
  rp.place.at[Axis::kReplica] = apart ? me.at[Axis::kReplica] : 0;
  rp.place.size[Axis::kReplica] = apart ? plan.replicas.count : 1;
  if (apart) {
    const Replicas& r = plan.replicas;
    rp.outer = schedule::OuterConfig{r.inner_steps, r.fragments, r.lr, r.momentum, r.dtype, r.overlap, r.outer};
  }
  const Stage& stage = plan.stages.at(me.at[Axis::kPp]);
  rp.chunks = stage.chunks.empty() ? std::vector<LayerRange>{{stage.first_layer, stage.num_layers}} : stage.chunks;
  rp.schedule = pipe_schedule(plan.activation.schedule);
  rp.micro_batch = plan.micro_batch;
  rp.micro_batches = plan.micro_batches;
  rp.global_batch = plan.global_batch;
  rp.seq_len = plan.seq_len;
  if (spec::micro_batches(rp.global_batch, rp.micro_batch, rp.place.data_size()) != rp.micro_batches)
    throw std::invalid_argument(fmt::format("rank_plan: {} micro-batches of {} over {} data ranks is not a global batch "
                                            "of {}", rp.micro_batches, rp.micro_batch, rp.place.data_size(),
                                            rp.global_batch));
  rp.steps = schedule::schedule_steps(rp.schedule, plan.pp, me.at[Axis::kPp], rp.micro_batches,
                                      static_cast<int>(rp.chunks.size()));
  rp.precision = plan.precision;
  rp.fp8_lm_head = plan.fp8_lm_head;
  rp.pipe_fp8 = plan.pipe_fp8;
  rp.recompute = plan.activation.recompute;
  rp.document_mask = plan.activation.document_mask;
  return rp;
}

}  // namespace holmes::plan
