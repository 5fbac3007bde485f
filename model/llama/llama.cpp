// Llama's configuration rules, tensors, initialisation and counts (model/architecture.hpp).
#include "model/llama/llama.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "model/llama/block.hpp"
#include "model/llama/counts.hpp"
#include "model/llama/hf.hpp"

namespace holmes::model::llama {

namespace {

class Llama final : public Architecture {
 public:
  const char* name() const override { return "llama"; }
  const char* label() const override { return "Llama"; }
  unsigned options() const override { return kKvHeads | kFfnHidden | kRopeTheta | kNormEps | kTieEmbeddings; }
  std::string fixed_choices() const override { return "RMSNorm, rotary positions, a SwiGLU MLP and no biases"; }

  void finalize(GptConfig& c) const override {
    if (c.kv_heads == 0) c.kv_heads = c.heads;
    if (c.ffn_hidden == 0) c.ffn_hidden = default_ffn_hidden(c.hidden, c.ffn_multiple);
    require_config(c.kv_heads >= 1 && c.heads % c.kv_heads == 0, "kv_heads", c.kv_heads,
                   fmt::format("a positive divisor of heads ({})", c.heads));
    require_config(c.head_size() % 2 == 0, "hidden / heads", c.head_size(),
                   "an even head size (rotary embeddings turn pairs)");
    require_config(c.kv_heads % c.tp_size == 0, "tp_size", c.tp_size,
                   fmt::format("a divisor of kv_heads ({}) (each tensor-parallel rank holds whole key/value heads)",
                               c.kv_heads));
    require_config(c.ffn_hidden >= 1 && c.ffn_hidden % c.tp_size == 0, "ffn_hidden", c.ffn_hidden,
                   fmt::format("a positive multiple of tp_size ({})", c.tp_size));
    require_config(c.rope_theta > 0, "rope_theta", std::lround(c.rope_theta), "> 0");
    require_config(c.norm_eps > 0, "norm_eps (x1e9)", std::lround(c.norm_eps * 1e9), "> 0");
  }

  // Grouped-query heads, the rotary head size and what the tensor-parallel degree must divide.
  std::vector<SpecProblem> spec_problems(const GptConfig& c, int tp) const override {
    std::vector<SpecProblem> out;
    if (c.heads < 1 || c.hidden % c.heads != 0) return out;  // reported with model.hidden
    const int kv = c.kv_heads == 0 ? c.heads : c.kv_heads;
    if (c.heads % kv != 0)
      out.push_back({"model.kv_heads", fmt::format("model.kv_heads = {} must divide model.heads = {} (each key/value "
                                                   "head serves a group of query heads); accepted: a divisor of {}, "
                                                   "or 0 for {}", c.kv_heads, c.heads, c.heads, c.heads)});
    if ((c.hidden / c.heads) % 2 != 0)
      out.push_back({"model.heads", fmt::format("model.hidden / model.heads = {} / {} = {} must be even for llama "
                                                "(rotary embeddings turn channel pairs)", c.hidden, c.heads,
                                                c.hidden / c.heads)});
    if (tp > 0 && kv % tp != 0)
      out.push_back({"parallel.tensor", fmt::format("parallel.tensor = {} must divide the key/value heads "
                                                    "model.kv_heads = {} (each tensor-parallel rank holds whole "
                                                    "key/value heads)", tp, kv)});
    if (tp > 0 && c.ffn_hidden != 0 && c.ffn_hidden % tp != 0)
      out.push_back({"model.ffn_hidden", fmt::format("model.ffn_hidden = {} must be a multiple of parallel.tensor = "
                                                     "{} (the MLP is split across tensor-parallel ranks)",
                                                     c.ffn_hidden, tp)});
    return out;
  }

  std::vector<std::pair<std::string, int64_t>> tp_divides(const GptConfig& c) const override {
    return {{"model.heads", c.heads}, {"model.kv_heads", c.kv_heads}, {"model.ffn_hidden", c.ffn_hidden}};
  }

  std::string describe(const GptConfig& c) const override {
    return fmt::format("Llama L={} C={} NH={} KVH={} F={} V={} (padded {}), rope_theta {}, {} head", c.layers,
                       c.hidden, c.heads, c.kv_heads, c.ffn_hidden, c.vocab, c.padded_vocab, c.rope_theta,
                       c.tie_embeddings ? "tied" : "untied");
  }

  RoleNames role_names(const GptConfig& c) const override {
    const std::string embed = "model.embed_tokens.weight";
    return {embed, "", "model.norm.weight", "", c.tie_embeddings ? embed : "lm_head.weight"};
  }

  std::vector<TensorSpec> layer_tensors(const GptConfig& c, int l) const override {
    const int64_t C = c.hidden, Cl = c.local_channels(), KVl = c.local_kv_channels(), Fl = c.local_mlp();
    const int64_t KV = int64_t{c.kv_heads} * c.head_size(), F = c.ffn_hidden;
    const std::string h = fmt::format("model.layers.{}.", l);
    // q, k, v, gate and up column-parallel (this rank's heads and MLP channels), o and down
    // row-parallel; Linear (out, in) shapes.
    return {{h + "input_layernorm.weight", {C}, {C}},
            {h + "self_attn.q_proj.weight", {Cl, C}, {C, C}, true, 0},
            {h + "self_attn.k_proj.weight", {KVl, C}, {KV, C}, true, 0},
            {h + "self_attn.v_proj.weight", {KVl, C}, {KV, C}, true, 0},
            {h + "self_attn.o_proj.weight", {C, Cl}, {C, C}, true, 1},
            {h + "post_attention_layernorm.weight", {C}, {C}},
            {h + "mlp.gate_proj.weight", {Fl, C}, {F, C}, true, 0},
            {h + "mlp.up_proj.weight", {Fl, C}, {F, C}, true, 0},
            {h + "mlp.down_proj.weight", {C, Fl}, {C, F}, true, 1}};
  }

  // Hugging Face's: every matrix N(0, 0.02), the RMSNorm weights 1.
  InitRule init_rule(const GptConfig&, const ParamTensor& t) const override {
    if (t.name.find("norm.") != std::string::npos) return {InitRule::kOne};
    return {InitRule::kNormal, 0.02f};
  }

  NormKind final_norm() const override { return NormKind::kRmsNorm; }
  BlockCounts block_counts(const GptConfig& c) const override { return llama::block_counts(c); }
  std::vector<LayerBuffer> layer_buffers(const GptConfig& c, int64_t N, const AttentionPlan& att) const override {
    return llama::layer_buffers(c, N, att);
  }
  std::vector<int64_t> gradient_scratch(const GptConfig& c, int64_t N) const override {
    return llama::gradient_scratch(c, N);
  }
  std::unique_ptr<Blocks> make_blocks(const GptConfig& c, device::DeviceMemory& mem, int max_T) const override {
    return std::make_unique<BlocksOf<Block>>(c, mem, max_T);
  }
  const HfMap* hugging_face() const override { return &hf_; }
  int legacy_file_version() const override { return 3; }

 private:
  Hf hf_;
};

}  // namespace

int default_ffn_hidden(int hidden, int multiple) {
  const int64_t f = (int64_t{2} * 4 * hidden + 2) / 3;  // ceil(2/3 * 4C)
  const int64_t m = std::max(multiple, 1);
  return static_cast<int>((f + m - 1) / m * m);
}

GptConfig config(int layers, int hidden, int heads, int kv_heads, int ffn_hidden, int vocab, int max_seq_len) {
  GptConfig c;
  c.arch = "llama";
  c.layers = layers;
  c.hidden = hidden;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.ffn_hidden = ffn_hidden;
  c.vocab = vocab;
  c.max_seq_len = max_seq_len;
  c.tie_embeddings = false;
  c.finalize();
  return c;
}

std::unique_ptr<Architecture> make_architecture() { return std::make_unique<Llama>(); }

}  // namespace holmes::model::llama
