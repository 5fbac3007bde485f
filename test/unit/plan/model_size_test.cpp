// The planner's model size (engine/plan/model_size.hpp, from spec numbers) and the model's
// own (model::GptConfig, ParamLayout, Gpt::flops_per_step) are two computations of one
// fact: the plan's memory check and the log's parameter count depend on them agreeing.
#include <catch2/catch.hpp>

#include <tuple>

#include "engine/plan/model_size.hpp"
#include "model/backend.hpp"
#include "model/cpu/cpu_kernels.hpp"
#include "model/cpu/host_memory.hpp"
#include "model/gpt.hpp"
#include "model/gpt_config.hpp"
#include "model/param_layout.hpp"

using namespace holmes;

TEST_CASE("model size: the planner's counts equal the model's for a grid of shapes and tensor-parallel degrees") {
  int checked = 0;
  for (int layers : {1, 3, 12})
    for (int hidden : {64, 96, 768})
      for (int vocab : {257, 1000, 50257})
        for (int tp : {1, 2, 4}) {
          const int heads = 4;
          const plan::GptShape shape{layers, hidden, heads, vocab, 128};
          const model::GptConfig whole = model::GptConfig::gpt2(layers, hidden, heads, vocab, 128);
          const model::GptConfig shard = whole.shard(tp, 0);
          CAPTURE(layers, hidden, vocab, tp);
          CHECK(plan::padded_vocab(vocab, tp) == shard.padded_vocab);
          // Whole model in memory: the tp = 1 layout of the padded model.
          model::GptConfig padded = whole;
          padded.padded_vocab = shard.padded_vocab;
          padded.finalize();
          CHECK(plan::total_params(shape, tp) == static_cast<int64_t>(model::ParamLayout(padded).size()));
          CHECK(plan::model_params(shape) == model::full_model_params(whole));
          // Tensor-parallel shards: split tensors divide by tp, replicated ones (LN, biases of
          // row-parallel layers, positions) are on every rank.
          int64_t shards = 0;
          for (int r = 0; r < tp; ++r) shards += static_cast<int64_t>(model::ParamLayout(whole.shard(tp, r)).size());
          int64_t replicated = 0;
          const model::ParamLayout layout(shard);
          for (const auto& t : layout.tensors())
            if (t.split_dim < 0) replicated += static_cast<int64_t>(t.numel);
          CHECK(shards - (tp - 1) * replicated == plan::total_params(shape, tp));
          // Training FLOPs per token.
          const double model_flops = model::Gpt::flops_per_step(padded, 1, 64) / 64.0;
          CHECK(plan::train_flops_per_token(shape, tp, 64) == Approx(model_flops).epsilon(1e-12));
          ++checked;
        }
  CHECK(checked == 81);
}

namespace {

// The planner's shape of a llama job spec and the model's config of the same numbers.
struct LlamaPair {
  plan::GptShape shape;
  model::GptConfig config;
};

LlamaPair llama_pair(int layers, int hidden, int heads, int kv_heads, int ffn_hidden, int vocab, bool tied) {
  spec::ModelSection m;
  m.arch = spec::ModelArch::kLlama;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.ffn_hidden = ffn_hidden;
  m.vocab_size = vocab;
  m.max_seq_len = 128;
  m.tie_embeddings = tied;
  model::GptConfig c = model::GptConfig::llama(layers, hidden, heads, kv_heads, ffn_hidden, vocab, 128);
  c.tie_embeddings = tied;
  c.finalize();
  return {plan::shape_of(m), c};
}

}  // namespace

TEST_CASE("model size: llama counts equal the model's (grouped-query heads, derived MLP width, tied and untied)") {
  int checked = 0;
  for (int layers : {1, 5})
    for (auto [hidden, heads, kv] : {std::tuple{64, 4, 2}, std::tuple{96, 6, 1}, std::tuple{128, 8, 8}})
      for (int ffn : {0, 200})  // 0: Llama's 2/3 x 4C rounded up to 256
        for (bool tied : {false, true})
          for (int tp : {1, 2}) {
            if (kv % tp != 0) continue;
            const LlamaPair p = llama_pair(layers, hidden, heads, kv, ffn, 1000, tied);
            CAPTURE(layers, hidden, heads, kv, ffn, tied, tp);
            CHECK(p.shape.ffn_hidden == p.config.ffn_hidden);
            CHECK(p.shape.kv_heads == p.config.kv_heads);
            model::GptConfig padded = p.config;
            padded.padded_vocab = model::GptConfig::pad_vocab(1000, tp);
            padded.finalize();
            CHECK(plan::total_params(p.shape, tp) == static_cast<int64_t>(model::ParamLayout(padded).size()));
            CHECK(plan::model_params(p.shape) == model::full_model_params(p.config));
            const double model_flops = model::Gpt::flops_per_step(padded, 1, 64) / 64.0;
            CHECK(plan::train_flops_per_token(p.shape, tp, 64) == Approx(model_flops).epsilon(1e-12));
            // Tensor-parallel shards: split tensors divide by tp, replicated ones (norms) are on
            // every rank.
            int64_t shards = 0, replicated = 0;
            for (int r = 0; r < tp; ++r)
              shards += static_cast<int64_t>(model::ParamLayout(p.config.shard(tp, r)).size());
            const model::ParamLayout first(p.config.shard(tp, 0));  // outlives the loop over its tensors
            for (const auto& t : first.tensors())
              if (t.split_dim < 0) replicated += static_cast<int64_t>(t.numel);
            CHECK(shards - (tp - 1) * replicated == plan::total_params(p.shape, tp));
            ++checked;
          }
  CHECK(checked == 40);
}

TEST_CASE("model size: Llama 3 8B is 8.03G parameters, its MLP width follows Llama's rule") {
  const LlamaPair p = llama_pair(32, 4096, 32, 8, 14336, 128256, false);
  CHECK(plan::model_params(p.shape) == 8'030'261'248);
  CHECK(model::full_model_params(p.config) == 8'030'261'248);
  // Llama 2 7B: ffn_hidden 0 gives 11008 (2/3 x 4 x 4096 = 10922.7, rounded up to 256).
  CHECK(llama_pair(32, 4096, 32, 32, 0, 32000, false).shape.ffn_hidden == 11008);
  CHECK(model::GptConfig::default_ffn_hidden(4096, 256) == 11008);
}

namespace {

struct Rank0 final : model::TensorParallelComm {  // rank 0 of tp; the sums are not run here
  int n;
  explicit Rank0(int tp) : n(tp) {}
  int size() const override { return n; }
  int rank() const override { return 0; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_max(float*, size_t) override {}
  void all_reduce_sum_bf16(void*, size_t) override {}
};

}  // namespace

TEST_CASE("model size: the activation bytes per layer, per slot and replayed are what the model keeps, every "
          "recompute mode") {
  // fp32 on the CPU (the exact attention keeps fp32 probabilities, as the planner's fp32
  // formula assumes). The model rounds each buffer up to 256 bytes: at most 17 per layer,
  // 4 + 8 per slot beside the layers.
  model::Backend backend{nullptr, "cpu", model::cpu::make_host_memory(), model::cpu::make_cpu_kernels()};
  const int B = 3, T = 40;
  using R = spec::Recompute;
  const std::pair<R, model::Recompute> modes[] = {{R::kNone, model::Recompute::kNone},
                                                  {R::kSelective, model::Recompute::kSelective},
                                                  {R::kFull, model::Recompute::kFull}};
  const LlamaPair llama = llama_pair(4, 64, 4, 2, 96, 300, false);
  const plan::GptShape gpt2_shape{4, 64, 4, 300, 64};
  const LlamaPair gpt2{gpt2_shape, model::GptConfig::gpt2(4, 64, 4, 300, 64)};
  for (const LlamaPair& p : {llama, gpt2})
    for (int tp : {1, 2})
      for (const auto& [spec_mode, model_mode] : modes)
        for (bool split : {false, true}) {
          CAPTURE(p.config.is_llama(), tp, spec::to_string(spec_mode), split);
          Rank0 comm(tp);
          const model::ActivationPolicy policy{model_mode, split};
          const plan::ActivationMode mode{spec_mode, split};
          // Per layer: the slot's share of one layer.
          const model::GptConfig mid = p.config.shard(tp, 0, 1, 2);
          model::Gpt g(mid, backend, B, T, &comm, 1, model::Precision::kFp32, policy);
          const double formula = plan::block_activation_bytes(p.shape, T, B, tp, 4, mode);
          CHECK(double(g.layer_slot_bytes()) >= formula);
          CHECK(double(g.layer_slot_bytes()) <= formula + 17 * 256);
          // Per slot, with the head and embedding: two slots minus one.
          for (const auto& [first, last] : {std::pair{true, false}, std::pair{false, true}}) {
            const model::GptConfig c = first ? p.config.shard(tp, 0, 0, 2) : p.config.shard(tp, 0, 2);
            model::Gpt one(c, backend, B, T, &comm, 1, model::Precision::kFp32, policy);
            model::Gpt two(c, backend, B, T, &comm, 2, model::Precision::kFp32, policy);
            const double slot = double(two.activation_bytes()) - double(one.activation_bytes());
            const double want = 2 * plan::block_activation_bytes(p.shape, T, B, tp, 4, mode) +
                                plan::stage_extra_activation_bytes(p.shape, T, B, tp, 4, mode, first, last);
            CHECK(slot >= want);
            CHECK(slot <= want + (2 * 17 + 12) * 256);
          }
          // The replayed layer: what the one-slot model holds beyond its slot and the scratch of
          // a model that replays nothing.
          model::Gpt none(mid, backend, B, T, &comm, 1, model::Precision::kFp32, {model::Recompute::kNone, split});
          const double work = double(g.activation_bytes()) - 2 * double(g.layer_slot_bytes()) -
                              (double(none.activation_bytes()) - 2 * double(none.layer_slot_bytes()));
          const double want_work = plan::recompute_work_bytes(p.shape, T, B, tp, 4, mode);
          CHECK(work >= want_work);
          CHECK(work <= want_work + 17 * 256);
        }
}
