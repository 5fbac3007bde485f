#include "model/param_layout.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "model/architecture.hpp"

namespace holmes::model {

void ParamLayout::add(const std::string& name, std::vector<int64_t> shape,
                      std::vector<int64_t> full_shape, bool decay, int split_dim, int split_parts,
                      const GptConfig& cfg, int layer) {
  ParamTensor t;
  t.name = name;
  t.shape = std::move(shape);
  t.full_shape = std::move(full_shape);
  t.offset = size_;
  t.numel = 1;
  for (int64_t d : t.shape) t.numel *= static_cast<size_t>(d);
  t.weight_decay = decay;
  t.split_dim = split_dim;
  t.split_parts = split_parts;
  t.tp_index = split_dim < 0 ? 0 : cfg.tp_rank;
  t.tp_count = split_dim < 0 ? 1 : cfg.tp_size;
  t.layer = layer;
  size_ += t.numel;
  tensors_.push_back(std::move(t));
}

ParamLayout::ParamLayout(const GptConfig& cfg) {
  const Architecture& arch = cfg.architecture();
  const RoleNames r = arch.role_names(cfg);
  const int64_t C = cfg.hidden, Vp = cfg.padded_vocab, Vl = cfg.local_vocab();
  if (cfg.has_embedding) {
    add(r.embedding, {Vl, C}, {Vp, C}, true, 0, 1, cfg, -1);
    if (!r.positions.empty()) add(r.positions, {cfg.max_seq_len, C}, {cfg.max_seq_len, C}, true, -1, 1, cfg, -1);
  }
  embedding_tensors_ = tensors_.size();
  tensors_per_layer_ = arch.layer_tensors(cfg, cfg.first_layer).size();
  for (int i = 0; i < cfg.num_stage_layers(); ++i) {
    const int l = cfg.first_layer + i;
    for (TensorSpec& t : arch.layer_tensors(cfg, l))
      add(t.name, std::move(t.shape), std::move(t.full_shape), t.weight_decay, t.split_dim, t.split_parts, cfg, l);
  }
  if (cfg.has_head) {
    add(r.final_norm_weight, {C}, {C}, false, -1, 1, cfg, -1);
    if (!r.final_norm_bias.empty()) add(r.final_norm_bias, {C}, {C}, false, -1, 1, cfg, -1);
    if (!cfg.tie_embeddings) {
      add(r.head, {Vl, C}, {Vp, C}, true, 0, 1, cfg, -1);
    } else if (!cfg.has_embedding) {
      add(r.embedding, {Vl, C}, {Vp, C}, true, 0, 1, cfg, -1);
      tensors_.back().tied_copy = true;
    }
  }
  for (ParamTensor& t : tensors_) {
    t.vocab_rows = t.layer < 0 && (t.name == r.embedding || t.name == r.head);
    t.tied_embedding = cfg.tie_embeddings && t.name == r.embedding;
  }
}

RoleNames role_names(const GptConfig& cfg) { return cfg.architecture().role_names(cfg); }

const ParamTensor* ParamLayout::find(const std::string& name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const ParamTensor& ParamLayout::at(const std::string& name) const {
  const ParamTensor* t = find(name);
  if (t == nullptr) throw std::out_of_range(fmt::format("parameter layout: no tensor '{}' in this shard", name));
  return *t;
}

int64_t ParamLayout::shard_offset(const ParamTensor& t, int64_t full_index) {
  // Walk the dimensions from the last (fastest) one, mapping each full index to the shard's.
  int64_t rest = full_index, local = 0, stride = 1;
  for (int d = static_cast<int>(t.full_shape.size()) - 1; d >= 0; --d) {
    int64_t i = rest % t.full_shape[d];
    rest /= t.full_shape[d];
    if (d == t.split_dim) {
      const int64_t block = t.full_shape[d] / t.split_parts;  // e.g. C of the q block
      const int64_t local_block = block / t.tp_count;
      const int64_t part = i / block, within = i % block;
      if (within / local_block != t.tp_index) return -1;
      i = part * local_block + within % local_block;
    }
    local += i * stride;
    stride *= t.shape[d];
  }
  return static_cast<int64_t>(t.offset) + local;
}

}  // namespace holmes::model
