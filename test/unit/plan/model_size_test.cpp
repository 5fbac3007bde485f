// The planner's model size (engine/plan/model_size.hpp, from spec numbers) and the model's
// own (model::GptConfig, ParamLayout, Gpt::flops_per_step) are two computations of one
// fact: the plan's memory check and the log's parameter count depend on them agreeing.
#include <catch2/catch.hpp>

#include "engine/plan/model_size.hpp"
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
