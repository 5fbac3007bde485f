// GPT-2's configuration rules, tensors, initialisation and counts (model/architecture.hpp).
#include "model/gpt2/gpt2.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string_view>

#include "model/block.hpp"
#include "model/gpt2/block.hpp"
#include "model/gpt2/counts.hpp"
#include "model/gpt2/hf.hpp"

namespace holmes::model::gpt2 {

namespace {

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

class Gpt2 final : public Architecture {
 public:
  const char* name() const override { return "gpt2"; }
  const char* label() const override { return "GPT"; }
  unsigned options() const override { return 0; }
  std::string fixed_choices() const override {
    return "multi-head attention, an MLP of 4 x model.hidden, LayerNorm eps 1e-5 and a tied head";
  }

  void finalize(GptConfig& c) const override {
    if (c.kv_heads == 0) c.kv_heads = c.heads;
    if (c.ffn_hidden == 0) c.ffn_hidden = 4 * c.hidden;
    // GPT-2's fixed choices: anything else is a configuration the kernels do not run.
    require_config(c.kv_heads == c.heads, "kv_heads", c.kv_heads, fmt::format("heads ({}) for gpt2", c.heads));
    require_config(c.ffn_hidden == 4 * c.hidden, "ffn_hidden", c.ffn_hidden,
                   fmt::format("4 * hidden ({}) for gpt2", 4 * c.hidden));
    require_config(c.tie_embeddings, "tie_embeddings", 0, "true for gpt2 (its LM head is the token embedding)");
    require_config(c.norm_eps == 1e-5f, "norm_eps (x1e6)", std::lround(c.norm_eps * 1e6), "10 (1e-5) for gpt2");
  }

  std::string describe(const GptConfig& c) const override {
    return fmt::format("GPT-2 L={} C={} NH={} V={} (padded {})", c.layers, c.hidden, c.heads, c.vocab, c.padded_vocab);
  }

  RoleNames role_names(const GptConfig&) const override { return {"wte", "wpe", "ln_f.weight", "ln_f.bias", "wte"}; }

  std::vector<TensorSpec> layer_tensors(const GptConfig& c, int l) const override {
    const int64_t C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp(), F = c.ffn_hidden;
    const std::string h = fmt::format("h.{}.", l);
    // c_attn is column-parallel with rows [q | k | v] (3 blocks, each split), the projections
    // row-parallel; Linear (out, in) shapes.
    return {{h + "ln_1.weight", {C}, {C}},
            {h + "ln_1.bias", {C}, {C}},
            {h + "attn.c_attn.weight", {3 * Cl, C}, {3 * C, C}, true, 0, 3},
            {h + "attn.c_attn.bias", {3 * Cl}, {3 * C}, false, 0, 3},
            {h + "attn.c_proj.weight", {C, Cl}, {C, C}, true, 1},
            {h + "attn.c_proj.bias", {C}, {C}},
            {h + "ln_2.weight", {C}, {C}},
            {h + "ln_2.bias", {C}, {C}},
            {h + "mlp.c_fc.weight", {Fl, C}, {F, C}, true, 0},
            {h + "mlp.c_fc.bias", {Fl}, {F}, false, 0},
            {h + "mlp.c_proj.weight", {C, Fl}, {C, F}, true, 1},
            {h + "mlp.c_proj.bias", {C}, {C}}};
  }

  // The GPT-2 paper's: N(0, 0.02), the residual projections (c_proj) scaled by 1/sqrt(2L),
  // biases 0, LayerNorm weights 1.
  InitRule init_rule(const GptConfig& c, const ParamTensor& t) const override {
    const bool norm = t.name.find("ln_") != std::string::npos;
    if (ends_with(t.name, ".bias")) return {InitRule::kZero};
    if (norm) return {InitRule::kOne};
    const float kStd = 0.02f;
    return {InitRule::kNormal, ends_with(t.name, "c_proj.weight") ? kStd / std::sqrt(2.0f * c.layers) : kStd};
  }

  NormKind final_norm() const override { return NormKind::kLayerNorm; }
  BlockCounts block_counts(const GptConfig& c) const override { return gpt2::block_counts(c); }
  std::vector<LayerBuffer> layer_buffers(const GptConfig& c, int64_t N, const AttentionPlan& att) const override {
    return gpt2::layer_buffers(c, N, att);
  }
  std::vector<int64_t> gradient_scratch(const GptConfig& c, int64_t N) const override {
    return gpt2::gradient_scratch(c, N);
  }
  std::unique_ptr<Blocks> make_blocks(const GptConfig&, device::DeviceMemory&, int) const override {
    return std::make_unique<BlocksOf<Block>>();
  }
  const HfMap* hugging_face() const override { return &hf_; }
  int legacy_file_version() const override { return 2; }

 private:
  Hf hf_;
};

}  // namespace

GptConfig config(int layers, int hidden, int heads, int vocab, int max_seq_len) {
  GptConfig c;
  c.arch = "gpt2";
  c.layers = layers;
  c.hidden = hidden;
  c.heads = heads;
  c.vocab = vocab;
  c.max_seq_len = max_seq_len;
  c.finalize();
  return c;
}

std::unique_ptr<Architecture> make_architecture() { return std::make_unique<Gpt2>(); }

}  // namespace holmes::model::gpt2
