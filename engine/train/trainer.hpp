// Training of one rank's model shard from a JobSpec. The single-process run (tp = pp = dp
// = 1) is run_training(); the pieces are kept apart so the distributed runtime can drive the
// same loop per rank: it passes its data-parallel coordinate and a GradientSync that
// all-reduces over its process group, and calls train_step() / evaluate() itself.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/spec/job_spec.hpp"
#include "engine/train/adamw.hpp"
#include "engine/train/data.hpp"
#include "engine/train/step_runner.hpp"
#include "model/gpt.hpp"
#include "model/kernels.hpp"

namespace holmes::train {

// Where this rank sits in the data-parallel group.
struct RankContext {
  int dp_rank = 0;
  int dp_size = 1;
};

// Cross-rank reductions the step needs. A single process uses LocalSync (identity).
class GradientSync {
 public:
  virtual ~GradientSync() = default;
  // grads (n) replaced by their mean over the data-parallel group.
  virtual void average_grads(float* grads, size_t n) = 0;
  // Sum of `value` over the ranks that together hold the whole gradient (for the norm) /
  // mean over data-parallel ranks (for the loss).
  virtual double sum_over_shards(double value) = 0;
  virtual double mean_over_data(double value) = 0;
};

class LocalSync final : public GradientSync {
 public:
  void average_grads(float*, size_t) override {}
  double sum_over_shards(double v) override { return v; }
  double mean_over_data(double v) override { return v; }
};


// GptConfig of spec.model (tp = 1, one stage; vocabulary padded by the model).
model::GptConfig gpt_config_of(const spec::JobSpec& spec);
// The learning-rate schedule and AdamW settings of spec.train (every trainer uses these).
LrConfig lr_config_of(const spec::JobSpec& spec);
AdamWHyper adamw_hyper_of(const spec::JobSpec& spec);
// Validation reads train.eval_steps global batches of the unshuffled validation sampler (as
// Megatron-LM's --eval-iters), so the validation loss is the same under every parallel plan.
// Micro-batch `index` (0 .. eval_steps * micro_batches - 1) of data-parallel rank dp_rank:
BatchCoord validation_coord(const spec::JobSpec& spec, int index, int micro_batches, int dp_rank, int dp_size);

class Trainer final : public StepRunner {
 public:
  // data, kernels and sync must outlive the trainer; sync == nullptr = single process.
  Trainer(const spec::JobSpec& spec, model::Kernels& kernels, const DataSet& data, RankContext rank = {},
          GradientSync* sync = nullptr);

  // One optimizer step: micro-batch forward/backward with accumulation, gradient sync,
  // clipping, schedule, AdamW. Throws std::runtime_error when the loss is not finite.
  StepStats train_step(int64_t step) override;
  // Mean validation loss over train.eval_steps micro-batches (the same ones every time);
  // NaN when there is no validation data.
  double evaluate() override;
  ShardState shard_state() override;
  const model::GptConfig& shard_config() const override { return gpt_->config(); }

  model::Gpt& model() { return *gpt_; }
  const model::Gpt& model() const { return *gpt_; }
  int micro_batches() const override { return micro_batches_; }
  int64_t tokens_per_step() const override { return spec_.train.global_batch * static_cast<int64_t>(spec_.train.seq_len); }
  // FLOPs per token counted the usual way (6N + 12 L T C), for TFLOP/s and MFU.
  double flops_per_token() const override;

 private:
  const spec::JobSpec& spec_;
  const DataSet& data_;
  RankContext rank_;
  LocalSync local_;
  GradientSync* sync_;
  std::unique_ptr<model::Gpt> gpt_;
  std::vector<float> m_, v_;  // AdamW moments over the flat buffer
  std::vector<DecayRange> decay_;
  std::vector<int32_t> inputs_, targets_;  // (B, T)
  LrConfig lr_;
  AdamWHyper hyper_;
  int micro_batches_ = 1;
};

// Single-process training of `spec` with logging, validation, metrics.jsonl and the final
// weights in <output_dir>/final. Returns the exit code (0). Throws UserError on bad input.
int run_training(const spec::JobSpec& spec);

}  // namespace holmes::train
