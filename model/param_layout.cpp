#include "model/param_layout.hpp"

#include <fmt/format.h>

#include <stdexcept>

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
  if (cfg.is_llama())
    add_llama(cfg);
  else
    add_gpt2(cfg);
  for (ParamTensor& t : tensors_) {
    const RoleNames r = role_names(cfg);
    t.vocab_rows = t.layer < 0 && (t.name == r.embedding || t.name == r.head);
    t.tied_embedding = cfg.tie_embeddings && t.name == r.embedding;
  }
}

void ParamLayout::add_gpt2(const GptConfig& cfg) {
  const int64_t C = cfg.hidden, Cl = cfg.local_channels(), Fl = cfg.local_mlp();
  const int64_t Vp = cfg.padded_vocab, Vl = cfg.local_vocab(), F = cfg.ffn_hidden;
  embedding_tensors_ = cfg.has_embedding ? 2 : 0;
  tensors_per_layer_ = 12;
  if (cfg.has_embedding) {
    add("wte", {Vl, C}, {Vp, C}, true, 0, 1, cfg, -1);
    add("wpe", {cfg.max_seq_len, C}, {cfg.max_seq_len, C}, true, -1, 1, cfg, -1);
  }
  for (int i = 0; i < cfg.num_stage_layers(); ++i) {
    const int l = cfg.first_layer + i;
    const std::string h = fmt::format("h.{}.", l);
    add(h + "ln_1.weight", {C}, {C}, false, -1, 1, cfg, l);
    add(h + "ln_1.bias", {C}, {C}, false, -1, 1, cfg, l);
    add(h + "attn.c_attn.weight", {3 * Cl, C}, {3 * C, C}, true, 0, 3, cfg, l);
    add(h + "attn.c_attn.bias", {3 * Cl}, {3 * C}, false, 0, 3, cfg, l);
    add(h + "attn.c_proj.weight", {C, Cl}, {C, C}, true, 1, 1, cfg, l);
    add(h + "attn.c_proj.bias", {C}, {C}, false, -1, 1, cfg, l);
    add(h + "ln_2.weight", {C}, {C}, false, -1, 1, cfg, l);
    add(h + "ln_2.bias", {C}, {C}, false, -1, 1, cfg, l);
    add(h + "mlp.c_fc.weight", {Fl, C}, {F, C}, true, 0, 1, cfg, l);
    add(h + "mlp.c_fc.bias", {Fl}, {F}, false, 0, 1, cfg, l);
    add(h + "mlp.c_proj.weight", {C, Fl}, {C, F}, true, 1, 1, cfg, l);
    add(h + "mlp.c_proj.bias", {C}, {C}, false, -1, 1, cfg, l);
  }
  if (cfg.has_head) {
    add("ln_f.weight", {C}, {C}, false, -1, 1, cfg, -1);
    add("ln_f.bias", {C}, {C}, false, -1, 1, cfg, -1);
    if (!cfg.has_embedding) {
      add("wte", {Vl, C}, {Vp, C}, true, 0, 1, cfg, -1);
      tensors_.back().tied_copy = true;
    }
  }
}

void ParamLayout::add_llama(const GptConfig& cfg) {
  const int64_t C = cfg.hidden, Cl = cfg.local_channels(), KVl = cfg.local_kv_channels(), Fl = cfg.local_mlp();
  const int64_t KV = int64_t{cfg.kv_heads} * cfg.head_size(), F = cfg.ffn_hidden;
  const int64_t Vp = cfg.padded_vocab, Vl = cfg.local_vocab();
  const std::string embed = "model.embed_tokens.weight";
  embedding_tensors_ = cfg.has_embedding ? 1 : 0;
  tensors_per_layer_ = 9;
  if (cfg.has_embedding) add(embed, {Vl, C}, {Vp, C}, true, 0, 1, cfg, -1);
  for (int i = 0; i < cfg.num_stage_layers(); ++i) {
    const int l = cfg.first_layer + i;
    const std::string h = fmt::format("model.layers.{}.", l);
    add(h + "input_layernorm.weight", {C}, {C}, false, -1, 1, cfg, l);
    add(h + "self_attn.q_proj.weight", {Cl, C}, {C, C}, true, 0, 1, cfg, l);
    add(h + "self_attn.k_proj.weight", {KVl, C}, {KV, C}, true, 0, 1, cfg, l);
    add(h + "self_attn.v_proj.weight", {KVl, C}, {KV, C}, true, 0, 1, cfg, l);
    add(h + "self_attn.o_proj.weight", {C, Cl}, {C, C}, true, 1, 1, cfg, l);
    add(h + "post_attention_layernorm.weight", {C}, {C}, false, -1, 1, cfg, l);
    add(h + "mlp.gate_proj.weight", {Fl, C}, {F, C}, true, 0, 1, cfg, l);
    add(h + "mlp.up_proj.weight", {Fl, C}, {F, C}, true, 0, 1, cfg, l);
    add(h + "mlp.down_proj.weight", {C, Fl}, {C, F}, true, 1, 1, cfg, l);
  }
  if (cfg.has_head) {
    add("model.norm.weight", {C}, {C}, false, -1, 1, cfg, -1);
    if (!cfg.tie_embeddings) {
      add("lm_head.weight", {Vl, C}, {Vp, C}, true, 0, 1, cfg, -1);
    } else if (!cfg.has_embedding) {
      add(embed, {Vl, C}, {Vp, C}, true, 0, 1, cfg, -1);
      tensors_.back().tied_copy = true;
    }
  }
}

RoleNames role_names(const GptConfig& cfg) {
  if (!cfg.is_llama()) return {"wte", "wpe", "ln_f.weight", "ln_f.bias", "wte"};
  const std::string embed = "model.embed_tokens.weight";
  return {embed, "", "model.norm.weight", "", cfg.tie_embeddings ? embed : "lm_head.weight"};
}

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
