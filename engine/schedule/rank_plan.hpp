// What one rank runs: its slice of the job's plan, every decision resolved (the planner makes
// it: plan::rank_plan, engine/plan/rank_plan.hpp). The executor (engine/parallel) takes its
// place in the job, its layers, its pipeline table, its batch shape, what it recomputes and
// how it syncs replicas from here alone, never from the spec's parallel or batch keys. Pure data.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/schedule/axes.hpp"
#include "engine/schedule/schedule.hpp"
#include "engine/spec/choices.hpp"

namespace holmes::schedule {

// A run of consecutive layers: one model chunk of a stage.
struct LayerRange {
  int first_layer = 0;
  int num_layers = 0;
  bool operator==(const LayerRange&) const = default;
};

// The outer synchronization of diloco replicas (parallel.outer: engine/parallel/outer_sync.hpp).
struct OuterConfig {
  int inner_steps = 20;  // H
  int fragments = 1;     // F
  double lr = 0.7, momentum = 0.9;
  spec::OuterDtype dtype = spec::OuterDtype::kFp32;
  int overlap = 0;  // tau: inner steps the exchange runs beside (0 = the next step waits)
  // sync: elastic sync replicas (HSDP, docs/elastic.md): no outer exchange; every step the
  // owned gradient shards are all-reduced across the replicas before the update.
  spec::OuterMode mode = spec::OuterMode::kDiloco;
};

// The data-parallel gradient bucket: reduce-scatters of about this many bytes overlap the
// backward (engine/parallel/dist_optimizer.hpp).
inline constexpr int kDefaultBucketMb = 8;
inline constexpr size_t kDefaultBucketFloats = size_t{kDefaultBucketMb} << 20 >> 2;

struct RankPlan {
  int rank = 0;  // global rank
  // This rank's coordinate and every axis's degree. The replica axis is diloco's replicas and
  // elastic sync replicas (outer.mode); other sync replicas are part of the data-parallel degree.
  Place place;
  // This stage's model chunks: one, or under the interleaved schedule V of them, chunk c
  // holding virtual stage c x pp + stage. The embedding lives on the chunk whose first layer is
  // 0 of stage 0, the head on the last chunk of the last stage.
  std::vector<LayerRange> chunks;
  PipeSchedule schedule = PipeSchedule::k1f1b;
  // This stage's step table: schedule_steps(schedule, pp, stage, micro_batches, chunks), made
  // once here; the trainer sizes the activation slots from it, the pipeline stage runs it.
  std::vector<PipeStep> steps;
  int micro_batch = 1;    // sequences per micro-batch
  int micro_batches = 1;  // per step on each data-parallel rank: global_batch / (micro_batch x data ranks)
  int global_batch = 1;   // sequences per optimizer step, the whole job
  int seq_len = 1;
  // train.precision as given: auto is resolved by the backend (bf16 where it has bf16 kernels).
  spec::Precision precision = spec::Precision::kAuto;
  bool fp8_lm_head = false;  // precision fp8: the LM head's GEMMs in FP8 too (train.fp8_lm_head)
  // parallel.pipe_fp8 as the plan resolved it: this stage's boundary tensors travel in FP8.
  bool pipe_fp8 = false;
  spec::Recompute recompute = spec::Recompute::kNone;  // resolved: never auto
  // data.document_mask: attention and positions follow each micro-batch's documents (the
  // trainer fetches their positions; the planner priced the attention that can mask).
  bool document_mask = false;
  size_t bucket_floats = kDefaultBucketFloats;
  OuterConfig outer;  // place.degree(Axis::kReplica) > 1 only (and a rejoining rank's)

  // The table has W passes: the model runs its backward as B and W (zb-h1).
  bool split_backward() const;
  // The virtual stage of chunk c: c x pp + stage.
  int virtual_stage(int chunk) const;
};

}  // namespace holmes::schedule
