#include "engine/parallel/dist_optimizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace holmes::parallel {

int norm_unit(const model::ParamTensor& t, int total_layers) {
  if (t.layer >= 0) return 2 + t.layer;
  if (t.name == "wte" || t.name == "model.embed_tokens.weight") return 0;  // the token embedding or its copy
  if (t.name == "wpe") return 1;
  return 2 + total_layers;  // the final norm, an untied LM head
}

namespace {

// The tied embedding (or its copy) this shard holds, else nullptr.
const model::ParamTensor* tied_embedding(const model::ParamLayout& layout) {
  for (const auto& t : layout.tensors())
    if (t.tied_embedding) return &t;
  return nullptr;
}

}  // namespace

std::vector<GradBucket> plan_buckets(const model::ParamLayout& layout, size_t bucket_floats, int dp_size,
                                     int dp_rank) {
  std::vector<GradBucket> out;
  const auto& ts = layout.tensors();
  size_t end = layout.size(), begin = end;
  auto close = [&](size_t b, size_t e, bool embedding) {
    if (b < e) out.push_back({.begin = b, .end = e, .embedding = embedding});
  };
  // A bucket holds whole tensors of one unit (a block, or one of: the embedding, wpe, the
  // final norm with an untied head): its elements and where each sits in it are then the
  // same whichever layers share the stage.
  const int L = 1 << 20;  // any value above every layer index: units are only compared
  auto unit = [L](const model::ParamTensor& t) { return norm_unit(t, L); };
  for (size_t i = ts.size(); i-- > 0;) {
    const model::ParamTensor& t = ts[i];
    if (i + 1 < ts.size() && unit(ts[i + 1]) != unit(t)) {
      close(begin, end, false);
      end = begin;
    }
    if (t.tied_embedding) {  // a bucket of its own, see the header
      close(t.offset, t.offset + t.numel, true);
      end = begin = t.offset;
      continue;
    }
    begin = t.offset;
    if (end - begin >= bucket_floats) {
      close(begin, end, false);
      end = begin;
    }
  }
  close(begin, end, false);
  const size_t dp = static_cast<size_t>(dp_size), r = static_cast<size_t>(dp_rank);
  for (GradBucket& b : out) {
    b.chunk = (b.end - b.begin + dp - 1) / dp;
    b.own_begin = std::min(b.begin + r * b.chunk, b.end);
    b.own_end = std::min(b.begin + (r + 1) * b.chunk, b.end);
  }
  return out;
}

DistOptimizer::DistOptimizer(model::Gpt& gpt, ParallelGroups& groups, size_t bucket_floats)
    : gpt_(gpt), groups_(groups), dp_size_(groups.place().degree(schedule::Axis::kDp)), dp_rank_(groups.place()[schedule::Axis::kDp]),
      tp_rank_(groups.place()[schedule::Axis::kTp]), backend_(gpt.backend()) {
  device::DeviceMemory& mem = *backend_.memory;
  buckets_ = plan_buckets(gpt.layout(), bucket_floats, dp_size_, dp_rank_);
  const size_t nb = buckets_.size();
  pack_off_.assign(nb, 0);
  reduced_off_.assign(nb, 0);
  decay_.resize(nb);
  size_t packed = 0, reduced = 0;
  for (size_t k = nb; k-- > 0;) {  // ascending offsets: the packing order of the moments
    const GradBucket& b = buckets_[k];
    pack_off_[k] = packed;
    packed += b.own_end - b.own_begin;
    if (b.own_begin == b.own_end) continue;
    if (!owned_.empty() && owned_.back().second == b.own_begin)
      owned_.back().second = b.own_end;
    else
      owned_.emplace_back(b.own_begin, b.own_end);
  }
  for (size_t k = 0; k < nb; ++k) {
    const GradBucket& b = buckets_[k];
    reduced_off_[k] = reduced;
    reduced += b.chunk;
    for (const model::ParamTensor& t : gpt.layout().tensors()) {
      const size_t lo = std::max(t.offset, b.own_begin), hi = std::min(t.offset + t.numel, b.own_end);
      if (lo >= hi) continue;
      decay_[k].push_back({lo - b.own_begin, hi - b.own_begin, t.weight_decay});
      // Replicated over TP: every TP rank holds the same values, count them once.
      // Neighbouring tensors of one unit share one range: one sum-of-squares call per unit and
      // bucket, not per tensor (a GPT-2 124M step on one GPU: 51 calls instead of 148).
      if (!t.tied_copy && (t.split_dim >= 0 || tp_rank_ == 0)) {
        const NormRange r{k, lo - b.own_begin, hi - b.own_begin, norm_unit(t, gpt.config().layers)};
        if (!norm_.empty() && norm_.back().bucket == r.bucket && norm_.back().unit == r.unit &&
            norm_.back().end == r.begin)
          norm_.back().end = r.end;
        else
          norm_.push_back(r);
      }
    }
  }
  m_ = device::DeviceArray<float>(mem, packed);
  v_ = device::DeviceArray<float>(mem, packed);
  m_.zero();
  v_.zero();
  sq_ = device::DeviceArray<double>(mem, norm_units(gpt.config().layers));
  if (dp_size_ > 1) {
    reduced_ = device::DeviceArray<float>(mem, reduced);
    reduced_.zero();
    dp_ = true;
    scattered_.resize(nb);
    gathered_.resize(nb);
    gpt_.set_params_needed_hook([this](size_t begin, size_t end) { on_params_needed(begin, end); });
  }
  if (groups_.group(schedule::kEmbeddingGroup).size() > 1) tied_ = tied_embedding(gpt.layout());
  if (tied_) {
    tied_counts_ = !tied_->tied_copy;
    for (size_t k = 0; k < nb; ++k)
      if (buckets_[k].embedding) tied_bucket_ = k;
    gpt_.set_tied_grad_hook([this] { on_tied_grad(); });
  }
  if (dp_ || tied_) gpt_.set_grad_ready_hook([this](size_t begin, size_t end) { on_grads_ready(begin, end); });
}

DistOptimizer::~DistOptimizer() {
  // Nothing beside the compute outlives the buffers it uses.
  if (dp_) groups_.group(schedule::Axis::kDp).abandon();
  if (tied_) groups_.group(schedule::kEmbeddingGroup).abandon();
  gpt_.set_grad_ready_hook({});
  gpt_.set_params_needed_hook({});
  gpt_.set_tied_grad_hook({});
}

void DistOptimizer::arm() {
  if (!dp_ && !tied_) return;
  armed_ = true;
  overlapped_ = 0;
  next_ = 0;
  ready_floor_ = gpt_.num_params();
  tied_post_ = {};
  if (dp_) std::fill(scattered_.begin(), scattered_.end(), Work{});
}

void DistOptimizer::on_grads_ready(size_t begin, size_t end) {
  if (!armed_) return;
  if (end != ready_floor_)
    throw std::logic_error(fmt::format("DistOptimizer: gradient range [{}, {}) reported while [{}, ...) is final; "
                                       "backward must finish the buffer from its end", begin, end, ready_floor_));
  ready_floor_ = begin;
  if (!dp_) return;
  for (; next_ < buckets_.size() && buckets_[next_].begin >= ready_floor_; ++next_) {
    if (tied_ && next_ == tied_bucket_) continue;  // after the embedding sum
    submit(next_);
    ++overlapped_;
  }
}

void DistOptimizer::on_tied_grad() {
  // Every micro-batch's backward reports; the armed one, the step's last, completes the sum.
  if (!armed_ || tied_sum_.pending()) return;
  // A device group queues it on the side queue, where it would hold up the reduce-scatters
  // the rest of this backward posts: finish_grads queues it behind them.
  if (dp_ && groups_.group(schedule::kEmbeddingGroup).mode() == Group::Mode::kDevice) return;
  post_tied(true);
}

void DistOptimizer::post_tied(bool in_backward) {
  size_t ahead = 0;
  if (in_backward) {  // the gradients below ready_floor_ are still to come, the tied range aside
    const size_t end = std::min(tied_->offset + tied_->numel, ready_floor_);
    ahead = ready_floor_ - (end > tied_->offset ? end - tied_->offset : 0);
  }
  tied_post_ = {.posted = true, .in_backward = in_backward, .ahead = ahead};
  // Megatron's embedding group: the first stage's wte and the last stage's copy both get the
  // sum of the two gradients, so the copies stay equal after the update.
  tied_sum_ = groups_.group(schedule::kEmbeddingGroup).all_reduce_beside(Buf::f32(gpt_.grads() + tied_->offset, tied_->numel),
                                                    comm::ReduceOp::kSum);
}

void DistOptimizer::land_tied() {
  if (!tied_sum_.pending()) return;
  tied_sum_.land();  // rethrows a failed sum
  tied_sum_ = Work{};
  if (!dp_) return;
  submit(tied_bucket_);
  land_scattered(tied_bucket_);
}

void DistOptimizer::land_scattered(size_t k) {
  scattered_[k].land();
  scattered_[k] = Work{};
  backend_.kernels->scale_forward(reduced_.data() + reduced_off_[k], 1.0f / static_cast<float>(dp_size_),
                                  buckets_[k].chunk);
}

void DistOptimizer::submit(size_t k) {
  const GradBucket& b = buckets_[k];
  // The group zero-pads a bucket dp does not divide to chunk x dp.
  scattered_[k] = groups_.group(schedule::Axis::kDp).reduce_scatter(Buf::f32(reduced_.data() + reduced_off_[k], b.chunk),
                                              Buf::f32(gpt_.grads() + b.begin, b.end - b.begin), comm::ReduceOp::kSum);
}

void DistOptimizer::finish_grads() {
  // Not posted during backward: a device group, or a step whose last backward was not armed.
  if (tied_ && !tied_sum_.pending()) post_tied(false);
  armed_ = false;
  if (!dp_) return;
  const auto tied = [&](size_t k) { return tied_ && k == tied_bucket_; };  // after the embedding sum
  for (size_t k = 0; k < buckets_.size(); ++k)
    if (!tied(k) && !scattered_[k].pending()) submit(k);
  // Every bucket's sum has landed, then the average, on the compute queue.
  for (size_t k = 0; k < buckets_.size(); ++k)
    if (!tied(k)) land_scattered(k);
}

void DistOptimizer::average_over_replicas(Group& outer) {
  if (outer.size() < 2) return;
  land_tied();  // its bucket's owned part is final only after the embedding sum
  float* grads = dp_ ? reduced_.data() : gpt_.grads();
  const size_t n = dp_ ? reduced_.size() : gpt_.num_params();
  outer.all_reduce(Buf::f32(grads, n), comm::ReduceOp::kSum);
  backend_.kernels->scale_forward(grads, 1.0f / static_cast<float>(outer.size()), n);
}

const float* DistOptimizer::owned_grads(size_t k) const {
  return dp_ ? reduced_.data() + reduced_off_[k] : gpt_.grads() + buckets_[k].own_begin;
}

void DistOptimizer::add_owned_grad_sq(std::vector<double>& by_unit) {
  sq_.zero();
  // A tied wte's squares last, after its sum over the embedding group lands: it is unit 0's
  // only tensor, so every unit's sum keeps its order.
  for (const bool tied_part : {false, true}) {
    if (tied_part && tied_counts_) land_tied();
    for (const NormRange& r : norm_)
      if ((tied_ && r.bucket == tied_bucket_) == tied_part)
        backend_.kernels->sum_squares_forward(sq_.data() + r.unit, owned_grads(r.bucket) + r.begin, r.end - r.begin);
  }
  std::vector<double> host(sq_.size());
  sq_.download(host);
  for (size_t u = 0; u < host.size(); ++u) by_unit.at(u) += host[u];
}

void DistOptimizer::update(const AdamWHyper& h, int64_t t, float grad_scale) {
  params_ready();  // a step whose forward did not run (a failure) may have left gathers
  auto adamw = [&](size_t k) {
    const GradBucket& b = buckets_[k];
    const size_t n = b.own_end - b.own_begin;
    if (n == 0) return;
    adamw_update(*backend_.kernels, gpt_.params() + b.own_begin, owned_grads(k), m_.data() + pack_off_[k],
                 v_.data() + pack_off_[k], 0, n, decay_[k], h, t, grad_scale);
  };
  // A last stage's tied copy (the norm does not count it) is the one gradient read here first:
  // its sum over the embedding group lands after every other bucket's update.
  for (size_t k = 0; k < buckets_.size(); ++k)
    if (!tied_ || k != tied_bucket_) adamw(k);
  if (tied_) {
    land_tied();
    adamw(tied_bucket_);
  }
  if (dp_) {
    // In forward order, so the next forward's first layers find theirs first. Each rank gives
    // its owned part (the group zero-pads it to the chunk); every rank receives the bucket.
    for (size_t k = buckets_.size(); k-- > 0;) {
      const GradBucket& b = buckets_[k];
      gathered_[k] = groups_.group(schedule::Axis::kDp).all_gather(Buf::f32(gpt_.params() + b.begin, b.end - b.begin),
                                             Buf::f32(gpt_.params() + b.own_begin, b.own_end - b.own_begin));
    }
    gather_next_ = 0;
    gathering_ = true;
    gathers_deferred_ = 0;
    return;
  }
  gpt_.params_updated();
}

void DistOptimizer::land(size_t k) {
  ++gathers_deferred_;
  gathered_[k].land();  // rethrows a failed all-gather
  gathered_[k] = Work{};
  gpt_.params_updated(buckets_[k].begin, buckets_[k].end);
}

void DistOptimizer::on_params_needed(size_t /*begin*/, size_t end) {
  // Ranges ascend and buckets never straddle them in a way that matters: every bucket
  // starting below `end` holds weights this or an earlier range needs.
  if (!gathering_) return;
  const size_t nb = buckets_.size();
  while (gather_next_ < nb && buckets_[nb - 1 - gather_next_].begin < end) land(nb - 1 - gather_next_++);
  if (gather_next_ == nb) gathering_ = false;
}

void DistOptimizer::params_ready() {
  if (!gathering_) return;
  on_params_needed(0, gpt_.num_params());
}

}  // namespace holmes::parallel
