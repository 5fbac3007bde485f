// gptj's configuration rules, tensors, initialisation and counts (model/architecture.hpp).
#include "test/arch/gptj/gptj.hpp"

#include <fmt/format.h>

#include <cmath>

#include "model/block.hpp"
#include "test/arch/gptj/block.hpp"
#include "test/arch/gptj/counts.hpp"

namespace holmes::test::gptj {

namespace {

using model::InitRule;
using model::ParamTensor;
using model::RoleNames;
using model::TensorSpec;

class GptJ final : public model::Architecture {
 public:
  const char* name() const override { return "gptj"; }
  const char* label() const override { return "GPT-J"; }
  unsigned options() const override { return model::kRopeTheta | model::kTieEmbeddings; }
  std::string fixed_choices() const override {
    return "multi-head attention, an MLP of 4 x model.hidden and LayerNorm eps 1e-5";
  }

  void finalize(GptConfig& c) const override {
    if (c.kv_heads == 0) c.kv_heads = c.heads;
    if (c.ffn_hidden == 0) c.ffn_hidden = 4 * c.hidden;
    model::require_config(c.kv_heads == c.heads, "kv_heads", c.kv_heads, fmt::format("heads ({}) for gptj", c.heads));
    model::require_config(c.ffn_hidden == 4 * c.hidden, "ffn_hidden", c.ffn_hidden,
                          fmt::format("4 * hidden ({}) for gptj", 4 * c.hidden));
    model::require_config(c.norm_eps == 1e-5f, "norm_eps (x1e6)", std::lround(c.norm_eps * 1e6), "10 (1e-5) for gptj");
    model::require_config(c.head_size() % 2 == 0, "hidden / heads", c.head_size(),
                          "an even head size (rotary embeddings turn pairs)");
    model::require_config(c.rope_theta > 0, "rope_theta", std::lround(c.rope_theta), "> 0");
  }

  std::vector<model::SpecProblem> spec_problems(const GptConfig& c, int) const override {
    if (c.heads < 1 || c.hidden % c.heads != 0 || (c.hidden / c.heads) % 2 == 0) return {};
    return {{"model.heads", fmt::format("model.hidden / model.heads = {} / {} = {} must be even for gptj (rotary "
                                        "embeddings turn channel pairs)", c.hidden, c.heads, c.hidden / c.heads)}};
  }

  std::string describe(const GptConfig& c) const override {
    return fmt::format("GPT-J L={} C={} NH={} V={} (padded {}), rope_theta {}, {} head", c.layers, c.hidden, c.heads,
                       c.vocab, c.padded_vocab, c.rope_theta, c.tie_embeddings ? "tied" : "untied");
  }

  RoleNames role_names(const GptConfig& c) const override {
    const std::string wte = "transformer.wte.weight";
    return {wte, "", "transformer.ln_f.weight", "transformer.ln_f.bias", c.tie_embeddings ? wte : "lm_head.weight"};
  }

  std::vector<TensorSpec> layer_tensors(const GptConfig& c, int l) const override {
    const int64_t C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp(), F = c.ffn_hidden;
    const std::string h = fmt::format("transformer.h.{}.", l);
    return {{h + "ln_1.weight", {C}, {C}},
            {h + "ln_1.bias", {C}, {C}},
            {h + "attn.q_proj.weight", {Cl, C}, {C, C}, true, 0},
            {h + "attn.k_proj.weight", {Cl, C}, {C, C}, true, 0},
            {h + "attn.v_proj.weight", {Cl, C}, {C, C}, true, 0},
            {h + "attn.out_proj.weight", {C, Cl}, {C, C}, true, 1},
            {h + "mlp.fc_in.weight", {Fl, C}, {F, C}, true, 0},
            {h + "mlp.fc_in.bias", {Fl}, {F}, false, 0},
            {h + "mlp.fc_out.weight", {C, Fl}, {C, F}, true, 1},
            {h + "mlp.fc_out.bias", {C}, {C}}};
  }

  // Matrices N(0, 0.02), biases 0, LayerNorm weights 1.
  InitRule init_rule(const GptConfig&, const ParamTensor& t) const override {
    const bool norm = t.name.find("ln_") != std::string::npos;
    const bool bias = t.name.size() > 5 && t.name.compare(t.name.size() - 5, 5, ".bias") == 0;
    if (bias) return {InitRule::kZero};
    if (norm) return {InitRule::kOne};
    return {InitRule::kNormal, 0.02f};
  }

  model::NormKind final_norm() const override { return model::NormKind::kLayerNorm; }
  BlockCounts block_counts(const GptConfig& c) const override { return gptj::block_counts(c); }
  std::vector<LayerBuffer> layer_buffers(const GptConfig& c, int64_t N, const AttentionPlan& att) const override {
    return gptj::layer_buffers(c, N, att);
  }
  std::vector<int64_t> gradient_scratch(const GptConfig& c, int64_t N) const override {
    return gptj::gradient_scratch(c, N);
  }
  std::unique_ptr<model::Blocks> make_blocks(const GptConfig& c, device::DeviceMemory& mem, int max_T) const override {
    return std::make_unique<model::BlocksOf<Block>>(c, mem, max_T);
  }
};

}  // namespace

std::unique_ptr<model::Architecture> make_architecture() { return std::make_unique<GptJ>(); }

GptConfig config(int layers, int hidden, int heads, int vocab, int max_seq_len) {
  GptConfig c;
  c.arch = "gptj";
  c.layers = layers;
  c.hidden = hidden;
  c.heads = heads;
  c.vocab = vocab;
  c.max_seq_len = max_seq_len;
  c.rope_theta = 10000;
  c.tie_embeddings = false;
  c.finalize();
  return c;
}

}  // namespace holmes::test::gptj
