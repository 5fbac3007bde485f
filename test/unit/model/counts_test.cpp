// model/counts.hpp against the parameter layout the model is built from (param_layout.hpp):
// the architectures' count formulas and the tensors they describe are two computations of one
// fact, which the planner's memory check and the log's parameter count rely on.
#include <catch2/catch.hpp>

#include <tuple>
#include <vector>

#include "model/counts.hpp"
#include "model/gpt_config.hpp"
#include "model/param_layout.hpp"
#include "model/gpt2/gpt2.hpp"
#include "model/llama/llama.hpp"

using namespace holmes::model;

namespace {

// The tensors of global layer `l` of a layout.
std::vector<const ParamTensor*> layer_tensors(const ParamLayout& layout, int l) {
  std::vector<const ParamTensor*> out;
  for (const ParamTensor& t : layout.tensors())
    if (t.layer == l) out.push_back(&t);
  return out;
}

// Checks every count of `whole` (tp = 1) and its tensor-parallel shards against the layouts.
void check_counts(const GptConfig& whole, int tp) {
  CAPTURE(whole.to_string(), tp);
  const GptConfig shard = whole.shard(tp, 0);
  CHECK(padded_vocab(whole.vocab, tp) == shard.padded_vocab);
  // Whole model in memory: the tp = 1 layout of the model padded for tp.
  GptConfig padded = whole;
  padded.padded_vocab = shard.padded_vocab;
  padded.finalize();
  const ParamLayout full(padded);
  CHECK(total_params(whole, tp) == static_cast<int64_t>(full.size()));
  // As users count them: without the padding rows of the vocabulary tensors.
  int64_t real = 0;
  const ParamLayout unpadded(whole);
  for (const ParamTensor& t : unpadded.tensors())
    real += t.vocab_rows ? int64_t{whole.vocab} * t.full_shape[1] : static_cast<int64_t>(t.numel);
  CHECK(model_params(whole) == real);
  // One block of the shard: its parameters and the 2-D (GEMM weight) tensors.
  const ParamLayout local(shard);
  // The 2-D tensors are GEMM weights, (OC, C); adjacent column-parallel ones of the same input
  // width are one fused GEMM (Llama's q, k, v and its gate, up: contiguous in the layout, one
  // call each).
  int64_t params = 0, gemm = 0, gemm_in = 0, gemm_out = 0;
  const ParamTensor* previous = nullptr;
  for (const ParamTensor* t : layer_tensors(local, 0)) {
    params += static_cast<int64_t>(t->numel);
    if (t->shape.size() == 2) {
      gemm += static_cast<int64_t>(t->numel);
      gemm_out += static_cast<int64_t>(t->shape[0]);
      const bool fused = previous != nullptr && previous->shape.size() == 2 && previous->split_dim == 0 &&
                         t->split_dim == 0 && previous->shape[1] == t->shape[1];
      if (!fused)
        gemm_in += static_cast<int64_t>(t->shape[1]);
    }
    previous = t;
  }
  const BlockCounts b = block_counts(shard);
  CHECK(b.params == params);
  CHECK(b.gemm_weights == gemm);
  CHECK(b.gemm_in_channels == gemm_in);
  CHECK(b.gemm_out_channels == gemm_out);
  CHECK(b.attention_channels == shard.local_channels());
  CHECK(block_counts(whole).params * whole.layers + embedding_params(whole, tp) + final_norm_params(whole) +
            untied_head_params(whole, tp) ==
        total_params(whole, tp));
  // Tensor-parallel shards: split tensors divide by tp, replicated ones are on every rank.
  int64_t shards = 0, replicated = 0;
  for (int r = 0; r < tp; ++r) shards += static_cast<int64_t>(ParamLayout(whole.shard(tp, r)).size());
  for (const ParamTensor& t : local.tensors())
    if (t.split_dim < 0) replicated += static_cast<int64_t>(t.numel);
  CHECK(shards - (tp - 1) * replicated == total_params(whole, tp));
  // FLOPs: the shard's per token, times tp, are the model's (the head's columns split too).
  CHECK(shard_train_flops(shard, 1, 64) / 64.0 * tp == Approx(train_flops_per_token(whole, tp, 64)).epsilon(1e-12));
  CHECK(stage_train_flops(whole, whole.layers, true, tp, 64, 64.0) ==
        Approx(shard_train_flops(shard, 1, 64)).epsilon(1e-12));
}

}  // namespace

TEST_CASE("counts: gpt2's equal its layout for a grid of shapes and tensor-parallel degrees", "[model][counts]") {
  int checked = 0;
  for (int layers : {1, 3, 12})
    for (int hidden : {64, 96, 768})
      for (int vocab : {257, 1000, 50257})
        for (int tp : {1, 2, 4}) {
          check_counts(gpt2::config(layers, hidden, 4, vocab, 128), tp);
          ++checked;
        }
  CHECK(checked == 81);
}

TEST_CASE("counts: llama's equal its layout (grouped-query heads, derived MLP width, tied and untied)",
          "[model][counts]") {
  int checked = 0;
  for (int layers : {1, 5})
    for (auto [hidden, heads, kv] : {std::tuple{64, 4, 2}, std::tuple{96, 6, 1}, std::tuple{128, 8, 8}})
      for (int ffn : {0, 200})  // 0: Llama's 2/3 x 4C rounded up to 256
        for (bool tied : {false, true})
          for (int tp : {1, 2}) {
            if (kv % tp != 0) continue;
            GptConfig c = llama::config(layers, hidden, heads, kv, ffn, 1000, 128);
            c.tie_embeddings = tied;
            c.finalize();
            check_counts(c, tp);
            ++checked;
          }
  CHECK(checked == 40);
}

TEST_CASE("counts: GPT-2 124M and Llama 3 8B as published", "[model][counts]") {
  CHECK(model_params(gpt2::config(12, 768, 12, 50257, 1024)) == 124'439'808);
  CHECK(model_params(llama::config(32, 4096, 32, 8, 14336, 128256, 8192)) == 8'030'261'248);
  // Llama 2 7B: ffn_hidden 0 gives 11008 (2/3 x 4 x 4096 = 10922.7, rounded up to 256).
  CHECK(llama::config(32, 4096, 32, 32, 0, 32000, 4096).ffn_hidden == 11008);
  CHECK(model_params(llama::config(32, 4096, 32, 32, 0, 32000, 4096)) == 6'738'415'616);
}
