// What the training loop (run.cpp) drives on every rank: a StepRunner. The Trainer
// (trainer.hpp) implements it for every kind of run; the loop sees only this interface, so
// logging, validation, checkpoints and preemption are written once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "model/gpt_config.hpp"
#include "model/param_layout.hpp"

namespace holmes::train {

struct StepStats {
  int64_t step = 0;         // 0-based step just taken
  double loss = 0;          // mean training loss over the step's micro-batches (and ranks)
  double lr = 0;
  double grad_norm = 0;     // global norm before clipping
  double step_ms = 0;
  double tokens_per_s = 0;  // whole job: global_batch * seq_len / step time
  double flops = 0;         // model FLOPs of this rank's step
  double comm_ms = 0;       // part of step_ms this rank spent waiting on communication (<= step_ms)
  double comm_share_max = 0;  // the largest comm_ms / step_ms of any rank (filled in by run_loop)
};

// One rank's trainable state, as checkpoints see it.
//
// `params` is the rank's whole shard buffer ([layout->size()], model/param_layout.hpp order).
// The rank OWNS the optimizer state of the flat-buffer ranges in `owned` (sorted, disjoint;
// one range [0, size) without a distributed optimizer, 1/dp of every gradient bucket with
// one). exp_avg / exp_avg_sq hold the AdamW moments of those ranges packed one after the
// other: element i of owned range k is at (sum of the lengths of ranges < k) + (i - begin).
// A checkpoint writes params and moments of the owned ranges only (DP ranks together cover
// the shard once); a load fills ALL of params and the moments of the owned ranges.
struct ShardState {
  const model::ParamLayout* layout = nullptr;
  const model::GptConfig* config = nullptr;  // this rank's shard config (tp, stage layers)
  float* params = nullptr;
  std::vector<std::pair<size_t, size_t>> owned;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  size_t owned_size() const {
    size_t n = 0;
    for (const auto& r : owned) n += r.second - r.first;
    return n;
  }
};

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // One optimizer step (0-based `step`); every rank returns the same loss, lr and grad_norm.
  // Throws std::runtime_error when the loss is not finite.
  virtual StepStats train_step(int64_t step) = 0;
  // Mean validation loss over train.eval_steps global batches (the same sequences under every
  // parallel plan), identical on every rank; NaN when there is no validation data.
  virtual double evaluate() = 0;
  virtual ShardState shard_state() = 0;

  // For the log header.
  virtual const model::GptConfig& shard_config() const = 0;
  virtual int micro_batches() const = 0;     // per step per data-parallel rank
  virtual int64_t tokens_per_step() const = 0;  // whole job
  virtual double flops_per_token() const = 0;   // whole model, 6N + 12 L T C
};

}  // namespace holmes::train
