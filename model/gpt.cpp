#include "model/gpt.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "common/errors.hpp"
#include "model/gpt_buffers.hpp"

namespace holmes::model {

using gpt_detail::at;
using gpt_detail::Carver;

Gpt::Gpt(GptConfig cfg, Backend& backend, int max_B, int max_T, TensorParallelComm* comm, int slots,
         DType precision, ActivationPolicy policy)
    : cfg_(cfg),
      arch_(cfg_.architecture()),
      backend_(backend),
      k_(*backend.kernels),
      mem_(*backend.memory),
      comm_(comm != nullptr ? comm : &no_comm_),
      max_B_(max_B),
      max_T_(max_T),
      precision_(precision),
      policy_(policy),
      env_{k_, mem_, *comm_, cfg_, policy_, attention_} {
  if (slots < 1) throw std::invalid_argument(fmt::format("Gpt: {} activation slots; need at least 1", slots));
  if (precision != DType::kF32 && precision != DType::kBf16)
    throw std::invalid_argument(fmt::format("Gpt: {} activations are not supported (accepted: fp32, bf16; FP8 runs "
                                            "the GEMMs alone, model/fp8_recipe.hpp)", dtype_name(precision)));
  if (!k_.supports(precision))
    throw std::invalid_argument(fmt::format("Gpt: backend {} has no {} kernels", k_.name(), dtype_name(precision)));
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
  params_ = device::DeviceArray<float>(mem_, layout_.size());
  grads_ = device::DeviceArray<float>(mem_, layout_.size());
  if (is_bf16()) params16_ = device::DeviceArray<bf16>(mem_, layout_.size());
  loss_log_ = device::DeviceArray<float>(mem_, kLossLog);
  params_.zero();
  grads_.zero();
  params16_.zero();
  attention_ = policy_.document_mask
                   ? k_.plan_attention(precision_, max_B, max_T, cfg_.local_channels(), cfg_.local_heads(),
                                       cfg_.local_kv_heads(), true)
                   : k_.plan_attention(precision_, max_B, max_T, cfg_.local_channels(), cfg_.local_heads(),
                                       cfg_.local_kv_heads());
  plan_activations();
  blocks_ = arch_.make_blocks(cfg_, mem_, max_T_);
}

Gpt::~Gpt() = default;

void Gpt::set_slot(int slot) {
  if (slot < 0 || slot >= slots())
    throw std::invalid_argument(fmt::format("Gpt::set_slot: slot {} outside [0, {})", slot, slots()));
  if (slot == slot_) return;
  slot_state_[slot_] = {B_, T_, have_targets_, positions_, masked_, loss_id_, weights_pending_};
  const SlotState& next = slot_state_[slot];
  B_ = next.B;
  T_ = next.T;
  have_targets_ = next.have_targets;
  positions_ = next.positions;
  masked_ = next.masked;
  loss_id_ = next.loss_id;
  weights_pending_ = next.weights_pending;
  slot_ = slot;
}

size_t Gpt::layer_first_tensor(int local_layer) const {
  return layout_.embedding_tensors() + layout_.tensors_per_layer() * static_cast<size_t>(local_layer);
}

size_t Gpt::embedding_end() const {
  const size_t n = layout_.embedding_tensors();
  if (n == 0) return 0;
  const ParamTensor& last = layout_.tensors()[n - 1];
  return last.offset + last.numel;
}

template <>
float* Gpt::weights<float>() {
  return params_.data();
}
template <>
bf16* Gpt::weights<bf16>() {
  return params16_.data();
}

void Gpt::params_updated() {
  if (is_bf16()) k_.convert(params16_.data(), params_.data(), params_.size());
}

void Gpt::params_updated(size_t begin, size_t end) {
  if (begin > end || end > params_.size())
    throw std::out_of_range(fmt::format("Gpt::params_updated: range [{}, {}) outside the {} parameters", begin, end,
                                        params_.size()));
  if (is_bf16() && begin < end) k_.convert(params16_.data() + begin, params_.data() + begin, end - begin);
}

std::pair<size_t, size_t> Gpt::layer_range(int local_layer) const {
  const size_t first = layer_first_tensor(local_layer);
  const ParamTensor& lo = layout_.tensors()[first];
  const ParamTensor& hi = layout_.tensors()[first + layout_.tensors_per_layer() - 1];
  return {lo.offset, hi.offset + hi.numel};
}

// The boundary holds the activation type's bytes (bf16: two values per float): a copy.
template <class A>
void Gpt::to_boundary(float* out, const A* x, size_t n) {
  if (static_cast<const void*>(out) != static_cast<const void*>(x)) mem_.copy(out, x, n * sizeof(A));
}

template <class A>
void Gpt::from_boundary(A* out, const float* x, size_t n) {
  mem_.copy(out, x, n * sizeof(A));
}

size_t Gpt::boundary_floats(int B, int T) const {
  const size_t n = static_cast<size_t>(B) * T * cfg_.hidden;
  return is_bf16() ? (n + 1) / 2 : n;
}

namespace {

// A token id outside [0, V) would index past the embedding or silently drop out of the loss;
// `lowest` is -1 for targets (not trained on), 0 for tokens.
void check_ids(const int* ids, size_t n, int V, const char* what, int lowest = 0) {
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < lowest || ids[i] >= V) {
      throw UserError(fmt::format("model input: {} id {} at position {} is outside the vocabulary [0, {}){}",
                                  what, ids[i], i, V, lowest < 0 ? " (or -1: not trained on)" : ""));
    }
  }
}

// Document positions: position t of a sequence is in [0, t] (0 starts a document).
void check_positions(const int* pos, int B, int T) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const int p = pos[static_cast<size_t>(b) * T + t];
      if (p < 0 || p > t || (t > 0 && p != 0 && p != pos[static_cast<size_t>(b) * T + t - 1] + 1))
        throw std::invalid_argument(fmt::format("Gpt: document position {} of token {} of sequence {} (accepted: 0, "
                                                "or one more than the token before's)", p, t, b));
    }
}

}  // namespace

void Gpt::check_shape(int B, int T) const {
  if (B < 1 || T < 1 || B > max_B_ || T > max_T_) {
    throw std::invalid_argument(fmt::format("Gpt: micro-batch B={} T={} outside the planned B<={} T<={}",
                                            B, T, max_B_, max_T_));
  }
}

template <class A>
const A* Gpt::stage_out() const {
  const int L = cfg_.num_stage_layers();
  return L == 0 ? shared<A>().encoded : layer_output<A>(L - 1);
}

const float* Gpt::output() const {
  if (is_bf16()) return shared<bf16>().out32;
  return stage_out<float>();
}

const float* Gpt::input_grad() const {
  if (is_bf16()) return shared<bf16>().grad32;
  return shared<float>().dres;
}

const float* Gpt::losses() const {
  return cfg_.has_head ? at<float>(slot_base(slot_), off_->losses) : nullptr;
}

void Gpt::read_logits(size_t row, std::span<float> host) const {
  const size_t Vl = cfg_.local_vocab();
  if (!cfg_.has_head || row >= static_cast<size_t>(B_) * T_ || host.size() != Vl)
    throw std::invalid_argument(fmt::format("Gpt::read_logits: row {} of {} into {} floats (Vl = {})", row,
                                            static_cast<size_t>(B_) * T_, host.size(), Vl));
  std::byte* logits = slot_base(slot_) + off_->logits;
  if (!is_bf16()) {
    mem_.download(host.data(), at<float>(logits, 0) + row * Vl, Vl * sizeof(float));
    return;
  }
  std::vector<bf16> raw(Vl);
  mem_.download(raw.data(), at<bf16>(logits, 0) + row * Vl, Vl * sizeof(bf16));
  for (size_t i = 0; i < Vl; ++i) host[i] = bf16_to_float(raw[i]);
}

float Gpt::forward(const int* tokens, const int* targets, int B, int T, const int* positions) {
  if (!cfg_.has_embedding || !cfg_.has_head) {
    throw std::logic_error("Gpt::forward needs the whole model; use forward_stage on a pipeline stage");
  }
  forward_stage(tokens, nullptr, targets, B, T, positions);
  return loss();
}

const int* Gpt::doc_pos() const {
  return positions_ ? position_store_.data() + slot_ * static_cast<size_t>(max_B_) * max_T_ : nullptr;
}

float Gpt::loss() const {
  if (loss_id_ < 0) return 0.0f;
  if (loss_id_ < logged_ - kLossLog)
    throw std::logic_error("Gpt::loss: the loss of that forward was overwritten in the loss log");
  float v = 0.0f;
  mem_.download(&v, loss_log_.data() + loss_id_ % kLossLog, sizeof(float));
  return v;
}

void Gpt::read_pending_losses() {
  // Entries taken_ .. logged_ - 1 of the ring: at most two contiguous pieces.
  const int64_t n = logged_ - taken_;
  const size_t before = early_.size();
  early_.resize(before + static_cast<size_t>(n));
  for (int64_t done = 0; done < n;) {
    const int64_t at = (taken_ + done) % kLossLog, len = std::min(n - done, kLossLog - at);
    mem_.download(early_.data() + before + done, loss_log_.data() + at, static_cast<size_t>(len) * sizeof(float));
    done += len;
  }
  taken_ = logged_;
}

double Gpt::take_loss_sum() {
  read_pending_losses();
  double sum = 0;
  for (float v : early_) sum += v;
  early_.clear();
  return sum;
}

void Gpt::forward_stage(const int* tokens, const float* input, const int* targets, int B, int T,
                        const int* positions) {
  check_shape(B, T);
  if (weights_pending_)  // W reads this slot's activations and gradients: a schedule bug
    throw std::logic_error(fmt::format("Gpt::forward_stage: slot {} still waits for its backward_weights()", slot_));
  if (positions && !policy_.document_mask)
    throw std::logic_error("Gpt::forward_stage: document positions for a model built without document_mask");
  B_ = B;
  T_ = T;
  positions_ = positions != nullptr;
  if (positions_) {
    check_positions(positions, B, T);
    mem_.upload(position_store_.data() + slot_ * static_cast<size_t>(max_B_) * max_T_, positions,
                static_cast<size_t>(B) * T * sizeof(int));
  }
  if (is_bf16())
    forward_t<bf16>(tokens, input, targets, B, T);
  else
    forward_t<float>(tokens, input, targets, B, T);
}

template <class A>
void Gpt::forward_t(const int* tokens, const float* input, const int* targets, int B, int T) {
  const size_t N = static_cast<size_t>(B) * T, C = cfg_.hidden;
  const Shared<A> s = shared<A>();
  if (cfg_.has_embedding) {
    check_ids(tokens, N, cfg_.vocab, "token");
    params_needed(0, embedding_end());
    int* tok = token_store_.data() + slot_ * static_cast<size_t>(max_B_) * max_T_;
    mem_.upload(tok, tokens, N * sizeof(int));
    // Vocabulary-parallel lookup: each shard fills the rows of its tokens, rank 0 adds the
    // learned positions (where the architecture has them), the sum over TP is the full embedding.
    A* w = weights<A>();
    const RoleNames names = arch_.role_names(cfg_);
    const A* wpe = cfg_.tp_rank == 0 && !names.positions.empty() ? w + layout_.at(names.positions).offset : nullptr;
    k_.embedding_forward(s.encoded, tok, doc_pos(), w + layout_.at(names.embedding).offset, wpe, B, T, cfg_.hidden,
                         cfg_.vocab_begin(), cfg_.local_vocab());
    tp_sum(env_, s.encoded, N * C);
  } else {
    from_boundary(s.encoded, input, N * C);
  }
  const A* x = s.encoded;
  for (int l = 0; l < cfg_.num_stage_layers(); ++l) {
    const auto [lo, hi] = layer_range(l);
    params_needed(lo, hi);
    blocks_->forward(env_, block_io<A>(l, x, B, T, Pass::kAll));
    x = layer_output<A>(l);
  }
  have_targets_ = false;
  loss_id_ = -1;
  if (cfg_.has_head) {
    params_needed(layout_.at(arch_.role_names(cfg_).final_norm_weight).offset, layout_.size());
    head_forward<A>(targets, B, T);
  }
  else if constexpr (!std::is_same_v<A, float>)
    to_boundary(s.out32, x, N * C);
}

template <class A>
void Gpt::head_forward(const int* targets, int B, int T) {
  const int N = B * T, C = cfg_.hidden, Vl = cfg_.local_vocab(), vb = cfg_.vocab_begin();
  const Shared<A> s = shared<A>();
  const A* x = stage_out<A>();
  A* W = weights<A>();
  const RoleNames names = arch_.role_names(cfg_);
  const A* norm_w = W + layout_.at(names.final_norm_weight).offset;
  switch (arch_.final_norm()) {
    case NormKind::kLayerNorm:
      k_.layernorm_forward(s.lnf, s.lnf_mean, s.lnf_rstd, x, norm_w, W + layout_.at(names.final_norm_bias).offset, N,
                           C);
      break;
    case NormKind::kRmsNorm: k_.rmsnorm_forward(s.lnf, s.lnf_rstd, x, norm_w, N, C, cfg_.norm_eps); break;
  }
  k_.matmul_forward(s.logits, s.lnf, W + layout_.at(names.head).offset, nullptr, N, C, Vl);
  if (targets == nullptr) return;
  check_ids(targets, N, cfg_.vocab, "target", -1);
  masked_ = std::any_of(targets, targets + N, [](int t) { return t < 0; });
  int* tgt = target_store_.data() + slot_ * static_cast<size_t>(max_B_) * max_T_;
  mem_.upload(tgt, targets, static_cast<size_t>(N) * sizeof(int));
  if (comm_->size() == 1) {
    // Nothing to all-reduce between the first two passes: one read of the logits.
    k_.crossentropy_fused_forward(s.row_max, s.ce_stats, s.logits, tgt, N, Vl, vb, cfg_.vocab);
  } else {
    k_.crossentropy_max_forward(s.row_max, s.logits, N, Vl, vb, cfg_.vocab);
    comm_->all_reduce_max(s.row_max, N);
    k_.crossentropy_stats_forward(s.ce_stats, s.logits, s.row_max, tgt, N, Vl, vb, cfg_.vocab);
    comm_->all_reduce_sum(s.ce_stats, 2 * static_cast<size_t>(N));
  }
  k_.crossentropy_forward(s.losses, s.ce_stats, s.row_max, N);
  if (masked_) k_.mask_losses(s.losses, tgt, N);  // -1 targets count 0 in the mean
  if (logged_ - taken_ == kLossLog) read_pending_losses();  // the log is full: read them now
  loss_id_ = logged_++;
  k_.mean_forward(loss_log_.data() + loss_id_ % kLossLog, s.losses, N);
  have_targets_ = true;
}

void Gpt::zero_grad() { grads_.zero(); }

void Gpt::load_params(std::span<const float> host) {
  if (host.size() != params_.size())
    throw std::invalid_argument(fmt::format("Gpt::load_params: {} floats for a buffer of {}", host.size(),
                                            params_.size()));
  params_.upload(host);
  params_updated();
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

// Used by the backward file too.
template void Gpt::to_boundary<bf16>(float*, const bf16*, size_t);
template void Gpt::from_boundary<float>(float*, const float*, size_t);
template void Gpt::from_boundary<bf16>(bf16*, const float*, size_t);
template const float* Gpt::stage_out<float>() const;
template const bf16* Gpt::stage_out<bf16>() const;

}  // namespace holmes::model
