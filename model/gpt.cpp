#include "model/gpt.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "common/errors.hpp"

namespace holmes::model {

// The 12 tensors of one layer, in layout order (see param_layout.hpp for shapes).
struct Gpt::LayerParams {
  float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw,
      *fcprojb;
};

// Saved activations of one layer, each sized for (max_B, max_T).
struct Gpt::LayerActs {
  float* ln1;       // (N,C)
  float* ln1_mean;  // (N)
  float* ln1_rstd;  // (N)
  float* qkv;       // (N,3Cl)
  float* atty;      // (N,Cl)
  float* att;       // (B,NHl,T,T)
  float* res2;      // (N,C) residual after attention
  float* ln2;       // (N,C)
  float* ln2_mean;  // (N)
  float* ln2_rstd;  // (N)
  float* fch;       // (N,Fl) MLP pre-activation
  float* fch_gelu;  // (N,Fl)
  float* res3;      // (N,C) layer output
};

Gpt::Gpt(GptConfig cfg, Backend& backend, int max_B, int max_T, TensorParallelComm* comm, int slots)
    : cfg_(cfg),
      backend_(backend),
      k_(*backend.kernels),
      mem_(*backend.memory),
      comm_(comm != nullptr ? comm : &no_comm_),
      max_B_(max_B),
      max_T_(max_T) {
  if (slots < 1) throw std::invalid_argument(fmt::format("Gpt: {} activation slots; need at least 1", slots));
  slot_state_.resize(slots);
  cfg_.finalize();
  if (comm_->size() != cfg_.tp_size || comm_->rank() != cfg_.tp_rank) {
    throw std::invalid_argument(fmt::format("Gpt: TP communicator is rank {} of {}, config says {} of {}",
                                            comm_->rank(), comm_->size(), cfg_.tp_rank, cfg_.tp_size));
  }
  if (max_B < 1 || max_T < 1 || max_T > cfg_.max_seq_len) {
    throw UserError(fmt::format("model: micro-batch shape B={} T={} is invalid; expected B >= 1 and "
                                "1 <= T <= max_seq_len ({})", max_B, max_T, cfg_.max_seq_len));
  }
  layout_ = ParamLayout(cfg_);
  params_ = DeviceArray<float>(mem_, layout_.size());
  grads_ = DeviceArray<float>(mem_, layout_.size());
  loss_dev_ = DeviceArray<float>(mem_, 1);
  params_.zero();
  grads_.zero();
  plan_activations();
}

void Gpt::plan_activations() {
  const size_t N = static_cast<size_t>(max_B_) * max_T_;
  const size_t C = cfg_.hidden, Cl = cfg_.local_channels(), Fl = cfg_.local_mlp();
  const size_t Vl = cfg_.local_vocab();
  const size_t att = static_cast<size_t>(max_B_) * cfg_.local_heads() * max_T_ * max_T_;
  layer_stride_ = 5 * N * C + 6 * N + 3 * N * Cl + att + 2 * N * Fl;
  const size_t head = cfg_.has_head ? N * C + 2 * N + N * Vl + N + N + 2 * N : 0;
  const size_t grads = 3 * N * C + N * 3 * Cl + N * Cl + N * Fl + att;
  // [slot 0 | slot 1 | ... | shared gradient scratch]; a slot is the stage input, every
  // layer's saved activations and the head's.
  slot_floats_ = N * C + cfg_.num_stage_layers() * layer_stride_ + head;
  acts_ = DeviceArray<float>(mem_, slots() * slot_floats_ + grads);
  acts_.zero();
  float* p = acts_.data() + slots() * slot_floats_;
  auto take = [&p](size_t n) { float* q = p; p += n; return q; };
  scratch_ = take(N * C);
  dres_ = take(N * C);
  dln_ = take(N * C);
  dqkv_ = take(N * 3 * Cl);
  datty_ = take(N * Cl);
  dfch_ = take(N * Fl);
  datt_ = take(att);
  token_store_ = DeviceArray<int>(mem_, slots() * N);
  target_store_ = DeviceArray<int>(mem_, slots() * N);
  token_store_.zero();
  target_store_.zero();
  point_slot(0);
}

void Gpt::point_slot(int slot) {
  const size_t N = static_cast<size_t>(max_B_) * max_T_;
  const size_t C = cfg_.hidden, Vl = cfg_.local_vocab();
  float* p = acts_.data() + slot * slot_floats_;
  auto take = [&p](size_t n) { float* q = p; p += n; return q; };
  encoded_ = take(N * C);
  layer_base_ = take(cfg_.num_stage_layers() * layer_stride_);
  if (cfg_.has_head) {
    lnf_ = take(N * C);
    lnf_mean_ = take(N);
    lnf_rstd_ = take(N);
    logits_ = take(N * Vl);
    losses_ = take(N);
    row_max_ = take(N);
    ce_stats_ = take(2 * N);
  }
  tokens_ = token_store_.data() + slot * N;
  targets_ = target_store_.data() + slot * N;
  slot_ = slot;
}

void Gpt::set_slot(int slot) {
  if (slot < 0 || slot >= slots())
    throw std::invalid_argument(fmt::format("Gpt::set_slot: slot {} outside [0, {})", slot, slots()));
  if (slot == slot_) return;
  slot_state_[slot_] = {B_, T_, have_targets_, loss_};
  const SlotState& next = slot_state_[slot];
  B_ = next.B;
  T_ = next.T;
  have_targets_ = next.have_targets;
  loss_ = next.loss;
  point_slot(slot);
}

Gpt::LayerParams Gpt::layer_params(float* base, int local_layer) const {
  const int first = (cfg_.has_embedding ? 2 : 0) + 12 * local_layer;
  float* t[12];
  for (int j = 0; j < 12; ++j) t[j] = base + layout_.tensors()[first + j].offset;
  return {t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11]};
}

Gpt::LayerActs Gpt::layer_acts(int local_layer) const {
  const size_t N = static_cast<size_t>(max_B_) * max_T_;
  const size_t C = cfg_.hidden, Cl = cfg_.local_channels(), Fl = cfg_.local_mlp();
  const size_t att = static_cast<size_t>(max_B_) * cfg_.local_heads() * max_T_ * max_T_;
  float* p = layer_base_ + local_layer * layer_stride_;
  auto take = [&p](size_t n) { float* q = p; p += n; return q; };
  LayerActs a{};
  a.ln1 = take(N * C);
  a.ln1_mean = take(N);
  a.ln1_rstd = take(N);
  a.qkv = take(N * 3 * Cl);
  a.atty = take(N * Cl);
  a.att = take(att);
  a.res2 = take(N * C);
  a.ln2 = take(N * C);
  a.ln2_mean = take(N);
  a.ln2_rstd = take(N);
  a.fch = take(N * Fl);
  a.fch_gelu = take(N * Fl);
  a.res3 = take(N * C);
  return a;
}

namespace {

// A token id outside [0, V) would index past the embedding or silently drop out of the loss.
void check_ids(const int* ids, size_t n, int V, const char* what) {
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= V) {
      throw UserError(fmt::format("model input: {} id {} at position {} is outside the vocabulary [0, {})",
                                  what, ids[i], i, V));
    }
  }
}

}  // namespace

void Gpt::check_shape(int B, int T) const {
  if (B < 1 || T < 1 || B > max_B_ || T > max_T_) {
    throw std::invalid_argument(fmt::format("Gpt: micro-batch B={} T={} outside the planned B<={} T<={}",
                                            B, T, max_B_, max_T_));
  }
}

const float* Gpt::output() const {
  const int L = cfg_.num_stage_layers();
  return L == 0 ? encoded_ : layer_acts(L - 1).res3;
}

float Gpt::forward(const int* tokens, const int* targets, int B, int T) {
  if (!cfg_.has_embedding || !cfg_.has_head) {
    throw std::logic_error("Gpt::forward needs the whole model; use forward_stage on a pipeline stage");
  }
  forward_stage(tokens, nullptr, targets, B, T);
  return loss_;
}

void Gpt::forward_stage(const int* tokens, const float* input, const int* targets, int B, int T) {
  check_shape(B, T);
  B_ = B;
  T_ = T;
  const size_t N = static_cast<size_t>(B) * T, C = cfg_.hidden;
  if (cfg_.has_embedding) {
    check_ids(tokens, N, cfg_.vocab, "token");
    mem_.upload(tokens_, tokens, N * sizeof(int));
    const ParamTensor& wte = layout_.at("wte");
    // Vocabulary-parallel lookup: each shard fills the rows of its tokens, rank 0 adds the
    // positions, the sum over TP is the full embedding.
    const float* wpe = cfg_.tp_rank == 0 ? params_.data() + layout_.at("wpe").offset : nullptr;
    k_.embedding_forward(encoded_, tokens_, params_.data() + wte.offset, wpe, B, T,
                         cfg_.hidden, cfg_.vocab_begin(), cfg_.local_vocab());
    comm_->all_reduce_sum(encoded_, N * C);
  } else {
    mem_.copy(encoded_, input, N * C * sizeof(float));
  }
  const float* x = encoded_;
  for (int l = 0; l < cfg_.num_stage_layers(); ++l) {
    block_forward(l, x, B, T);
    x = layer_acts(l).res3;
  }
  have_targets_ = false;
  loss_ = 0.0f;
  if (cfg_.has_head) head_forward(targets, B, T);
}

void Gpt::block_forward(int l, const float* x, int B, int T) {
  const LayerParams p = layer_params(params_.data(), l);
  const LayerActs a = layer_acts(l);
  const int N = B * T, C = cfg_.hidden, Cl = cfg_.local_channels(), Fl = cfg_.local_mlp();
  const bool rank0 = cfg_.tp_rank == 0;  // row-parallel biases are added once, before the sum
  k_.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1w, p.ln1b, N, C);
  k_.matmul_forward(a.qkv, a.ln1, p.qkvw, p.qkvb, N, C, 3 * Cl);
  k_.attention_forward(a.atty, a.att, a.qkv, B, T, Cl, cfg_.local_heads());
  k_.matmul_forward(scratch_, a.atty, p.attprojw, rank0 ? p.attprojb : nullptr, N, Cl, C);
  comm_->all_reduce_sum(scratch_, static_cast<size_t>(N) * C);
  k_.residual_forward(a.res2, x, scratch_, static_cast<size_t>(N) * C);
  k_.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, p.ln2w, p.ln2b, N, C);
  k_.matmul_forward(a.fch, a.ln2, p.fcw, p.fcb, N, C, Fl);
  k_.gelu_forward(a.fch_gelu, a.fch, static_cast<size_t>(N) * Fl);
  k_.matmul_forward(scratch_, a.fch_gelu, p.fcprojw, rank0 ? p.fcprojb : nullptr, N, Fl, C);
  comm_->all_reduce_sum(scratch_, static_cast<size_t>(N) * C);
  k_.residual_forward(a.res3, a.res2, scratch_, static_cast<size_t>(N) * C);
}

void Gpt::head_forward(const int* targets, int B, int T) {
  const int N = B * T, C = cfg_.hidden, Vl = cfg_.local_vocab(), vb = cfg_.vocab_begin();
  const float* x = output();
  float* P = params_.data();
  k_.layernorm_forward(lnf_, lnf_mean_, lnf_rstd_, x, P + layout_.at("ln_f.weight").offset,
                       P + layout_.at("ln_f.bias").offset, N, C);
  k_.matmul_forward(logits_, lnf_, P + layout_.at("wte").offset, nullptr, N, C, Vl);
  if (targets == nullptr) return;
  check_ids(targets, N, cfg_.vocab, "target");
  mem_.upload(targets_, targets, static_cast<size_t>(N) * sizeof(int));
  k_.crossentropy_max_forward(row_max_, logits_, N, Vl, vb, cfg_.vocab);
  comm_->all_reduce_max(row_max_, N);
  k_.crossentropy_stats_forward(ce_stats_, logits_, row_max_, targets_, N, Vl, vb, cfg_.vocab);
  comm_->all_reduce_sum(ce_stats_, 2 * static_cast<size_t>(N));
  k_.crossentropy_forward(losses_, ce_stats_, row_max_, N);
  k_.mean_forward(loss_dev_.data(), losses_, N);
  mem_.download(&loss_, loss_dev_.data(), sizeof(float));
  have_targets_ = true;
}

void Gpt::zero_grad() { grads_.zero(); }

void Gpt::load_params(std::span<const float> host) {
  if (host.size() != params_.size())
    throw std::invalid_argument(fmt::format("Gpt::load_params: {} floats for a buffer of {}", host.size(),
                                            params_.size()));
  params_.upload(host);
}

void Gpt::read_params(std::span<float> host) const {
  if (host.size() != params_.size())
    throw std::invalid_argument(fmt::format("Gpt::read_params: {} floats for a buffer of {}", host.size(),
                                            params_.size()));
  params_.download(host);
}

std::vector<float> Gpt::read_params() const {
  std::vector<float> host(params_.size());
  read_params(host);
  return host;
}

void Gpt::backward(float loss_scale) {
  if (!cfg_.has_head || !have_targets_) {
    throw std::logic_error("Gpt::backward needs a forward with targets on the last stage, once per forward");
  }
  have_targets_ = false;  // the logits are overwritten by their gradient below
  head_backward(loss_scale, B_, T_);
  stage_backward(B_, T_);
}

void Gpt::backward_stage(const float* doutput) {
  if (cfg_.has_head) throw std::logic_error("Gpt::backward_stage is for non-last stages; use backward()");
  mem_.copy(dres_, doutput, static_cast<size_t>(B_) * T_ * cfg_.hidden * sizeof(float));
  stage_backward(B_, T_);
}

void Gpt::head_backward(float loss_scale, int B, int T) {
  const int N = B * T, C = cfg_.hidden, Vl = cfg_.local_vocab(), vb = cfg_.vocab_begin();
  const float dloss = loss_scale / static_cast<float>(N);
  k_.crossentropy_backward(logits_, logits_, row_max_, ce_stats_, targets_, dloss, N, Vl, vb,
                           cfg_.vocab);
  const ParamTensor& wte = layout_.at("wte");
  k_.matmul_backward(dln_, grads_.data() + wte.offset, nullptr, logits_, lnf_,
                     params_.data() + wte.offset, N, C, Vl);
  comm_->all_reduce_sum(dln_, static_cast<size_t>(N) * C);  // each shard saw Vl of the Vp columns
  mem_.zero(dres_, static_cast<size_t>(N) * C * sizeof(float));
  const size_t w = layout_.at("ln_f.weight").offset, b = layout_.at("ln_f.bias").offset;
  k_.layernorm_backward(dres_, grads_.data() + w, grads_.data() + b, dln_, output(),
                        params_.data() + w, lnf_mean_, lnf_rstd_, N, C);
  // ln_f and a tied copy of wte are final; a whole model's wte waits for the embedding.
  grad_ready(w, layout_.size());
}

void Gpt::stage_backward(int B, int T) {
  const size_t per_layer = 12;  // tensors per layer, see param_layout.hpp
  const size_t first = cfg_.has_embedding ? 2 : 0;
  const auto& ts = layout_.tensors();
  for (int l = cfg_.num_stage_layers() - 1; l >= 0; --l) {
    block_backward(l, l == 0 ? encoded_ : layer_acts(l - 1).res3, B, T);
    const ParamTensor& lo = ts[first + per_layer * l];
    const ParamTensor& hi = ts[first + per_layer * l + per_layer - 1];
    grad_ready(lo.offset, hi.offset + hi.numel);
  }
  if (cfg_.has_embedding) {
    const size_t wte = layout_.at("wte").offset, wpe = layout_.at("wpe").offset;
    k_.embedding_backward(grads_.data() + wte, grads_.data() + wpe, dres_, tokens_, B, T,
                          cfg_.hidden, cfg_.vocab_begin(), cfg_.local_vocab());
    grad_ready(0, ts[1].offset + ts[1].numel);
  }
}

void Gpt::block_backward(int l, const float* x, int B, int T) {
  const LayerParams p = layer_params(params_.data(), l);
  const LayerParams g = layer_params(grads_.data(), l);
  const LayerActs a = layer_acts(l);
  const int N = B * T, C = cfg_.hidden, Cl = cfg_.local_channels(), Fl = cfg_.local_mlp();
  const size_t NC = static_cast<size_t>(N) * C;
  // dres_ holds d(res3); the residual passes it straight to res2 and to the MLP output.
  k_.matmul_backward(dfch_, g.fcprojw, g.fcprojb, dres_, a.fch_gelu, p.fcprojw, N, Fl, C);
  k_.gelu_backward(dfch_, a.fch, dfch_, static_cast<size_t>(N) * Fl);
  k_.matmul_backward(dln_, g.fcw, g.fcb, dfch_, a.ln2, p.fcw, N, C, Fl);
  comm_->all_reduce_sum(dln_, NC);  // column-parallel input gradient is partial per shard
  k_.layernorm_backward(dres_, g.ln2w, g.ln2b, dln_, a.res2, p.ln2w, a.ln2_mean, a.ln2_rstd, N, C);
  // dres_ now holds d(res2).
  k_.matmul_backward(datty_, g.attprojw, g.attprojb, dres_, a.atty, p.attprojw, N, Cl, C);
  k_.attention_backward(dqkv_, datt_, datty_, a.qkv, a.atty, a.att, B, T, Cl, cfg_.local_heads());
  k_.matmul_backward(dln_, g.qkvw, g.qkvb, dqkv_, a.ln1, p.qkvw, N, C, 3 * Cl);
  comm_->all_reduce_sum(dln_, NC);
  k_.layernorm_backward(dres_, g.ln1w, g.ln1b, dln_, x, p.ln1w, a.ln1_mean, a.ln1_rstd, N, C);
  // dres_ now holds d(x), the gradient of the layer input.
}

double Gpt::flops_per_step(const GptConfig& cfg, int B, int T) {
  const double N = static_cast<double>(B) * T, C = cfg.hidden;
  const double Cl = cfg.local_channels(), Fl = cfg.local_mlp();
  const double layer_weights = 3 * Cl * C + Cl * C + 2 * Fl * C;
  double fwd = cfg.num_stage_layers() * (2 * N * layer_weights + 4.0 * B * T * T * Cl);
  if (cfg.has_head) fwd += 2 * N * C * cfg.local_vocab();
  return 3 * fwd;  // backward costs twice the forward
}

}  // namespace holmes::model
