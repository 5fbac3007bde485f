#include "engine/train/trainer.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "engine/spec/errors.hpp"

namespace holmes::train {

model::GptConfig gpt_config_of(const spec::JobSpec& spec) {
  const auto& m = spec.model;
  auto cfg = model::GptConfig::gpt2(m.layers, m.hidden, m.heads, m.vocab_size, m.max_seq_len);
  cfg.finalize();
  if (spec.train.seq_len > cfg.max_seq_len)
    throw UserError(fmt::format("train.seq_len: {} is longer than model.max_seq_len {} (the learned position "
                                "embedding has that many rows)", spec.train.seq_len, cfg.max_seq_len));
  return cfg;
}

LrConfig lr_config_of(const spec::JobSpec& spec) {
  const auto& t = spec.train;
  return {.lr = t.lr, .min_lr = t.min_lr, .warmup_steps = t.warmup_steps, .total_steps = t.steps,
          .kind = parse_lr_schedule(t.lr_schedule)};
}

AdamWHyper adamw_hyper_of(const spec::JobSpec& spec) {
  const auto& t = spec.train;
  return {.lr = static_cast<float>(t.lr), .beta1 = static_cast<float>(t.beta1), .beta2 = static_cast<float>(t.beta2),
          .eps = static_cast<float>(t.eps), .weight_decay = static_cast<float>(t.weight_decay)};
}

Trainer::Trainer(const spec::JobSpec& spec, model::Kernels& kernels, const DataSet& data, RankContext rank,
                 GradientSync* sync)
    : spec_(spec), data_(data), rank_(rank), sync_(sync ? sync : &local_) {
  const auto& t = spec.train;
  if (!spec.global_batch_ok(rank.dp_size))
    throw UserError(fmt::format("train.global_batch: {} is not a multiple of train.micro_batch ({}) x data-parallel "
                                "degree ({})", t.global_batch, t.micro_batch, rank.dp_size));
  micro_batches_ = spec.micro_batches_per_step(rank.dp_size);
  gpt_ = std::make_unique<model::Gpt>(gpt_config_of(spec), kernels, t.micro_batch, t.seq_len);
  gpt_->init_weights(spec.job.seed);
  m_.assign(gpt_->num_params(), 0.0f);
  v_.assign(gpt_->num_params(), 0.0f);
  for (const auto& p : gpt_->layout().tensors()) decay_.push_back({p.offset, p.offset + p.numel, p.weight_decay});
  inputs_.resize(static_cast<size_t>(t.micro_batch) * t.seq_len);
  targets_.resize(inputs_.size());
  lr_ = lr_config_of(spec);
  hyper_ = adamw_hyper_of(spec);
}

double Trainer::flops_per_token() const {
  const auto& t = spec_.train;
  return gpt_->flops_per_step(t.micro_batch, t.seq_len) / (static_cast<double>(t.micro_batch) * t.seq_len);
}

StepStats Trainer::train_step(int64_t step) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto& t = spec_.train;
  gpt_->zero_grad();
  double loss_sum = 0;
  for (int micro = 0; micro < micro_batches_; ++micro) {
    BatchCoord c{.step = step, .micro = micro, .dp_rank = rank_.dp_rank, .dp_size = rank_.dp_size,
                 .micro_batch = t.micro_batch, .global_batch = t.global_batch};
    data_.train().fill_batch(c, inputs_.data(), targets_.data());
    loss_sum += gpt_->forward(inputs_.data(), targets_.data(), t.micro_batch, t.seq_len);
    gpt_->backward(1.0f / static_cast<float>(micro_batches_));  // mean over micro-batches
  }
  const size_t n = gpt_->num_params();
  sync_->average_grads(gpt_->grads(), n);
  StepStats s;
  s.step = step;
  s.loss = sync_->mean_over_data(loss_sum / micro_batches_);
  if (!std::isfinite(s.loss))
    throw std::runtime_error(fmt::format("training loss is {} at step {}: the run diverged (try a lower train.lr "
                                         "or train.grad_clip)", s.loss, step + 1));
  s.grad_norm = std::sqrt(sync_->sum_over_shards(grad_sq_sum(gpt_->grads(), 0, n)));
  const float scale = clip_scale(s.grad_norm, t.grad_clip);
  s.lr = lr_at(lr_, step);
  AdamWHyper h = hyper_;
  h.lr = static_cast<float>(s.lr);
  adamw_update(gpt_->params(), gpt_->grads(), m_.data(), v_.data(), 0, n, decay_, h, step + 1, scale);
  s.step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  s.tokens_per_s = static_cast<double>(tokens_per_step()) / (s.step_ms / 1e3);
  s.flops = gpt_->flops_per_step(t.micro_batch, t.seq_len) * micro_batches_;
  return s;
}

ShardState Trainer::shard_state() {
  ShardState st;
  st.layout = &gpt_->layout();
  st.config = &gpt_->config();
  st.params = gpt_->params();
  st.owned = {{0, gpt_->num_params()}};  // one rank holds all optimizer state
  st.exp_avg = m_.data();
  st.exp_avg_sq = v_.data();
  return st;
}

BatchCoord validation_coord(const spec::JobSpec& spec, int index, int micro_batches, int dp_rank, int dp_size) {
  return BatchCoord{.step = index / micro_batches, .micro = index % micro_batches, .dp_rank = dp_rank,
                    .dp_size = dp_size, .micro_batch = spec.train.micro_batch, .global_batch = spec.train.global_batch};
}

double Trainer::evaluate() {
  const BatchSampler* valid = data_.valid();
  if (!valid || valid->chunk_count() == 0) return std::nan("");
  const auto& t = spec_.train;
  const int count = std::max(1, t.eval_steps) * micro_batches_;
  double sum = 0;
  for (int e = 0; e < count; ++e) {
    valid->fill_batch(validation_coord(spec_, e, micro_batches_, rank_.dp_rank, rank_.dp_size), inputs_.data(),
                      targets_.data());
    sum += gpt_->forward(inputs_.data(), targets_.data(), t.micro_batch, t.seq_len);
  }
  return sync_->mean_over_data(sum / count);
}

}  // namespace holmes::train
