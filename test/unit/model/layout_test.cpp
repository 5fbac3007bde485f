// Parameter layout, vocabulary padding and config validation.
#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "model/counts.hpp"
#include "model/gpt_config.hpp"
#include "model/param_layout.hpp"
#include "model/gpt2/gpt2.hpp"

using namespace holmes::model;

TEST_CASE("vocabulary padding: multiple of 128, or of 64*tp when larger", "[model][layout]") {
  CHECK(GptConfig::pad_vocab(50257, 1) == 50304);
  CHECK(GptConfig::pad_vocab(37, 1) == 128);
  CHECK(GptConfig::pad_vocab(128, 2) == 128);
  CHECK(GptConfig::pad_vocab(257, 4) == 512);
  CHECK(GptConfig::pad_vocab(50257, 3) == 50304);  // 192 * 262
}

TEST_CASE("GPT-2 124M layout: sizes, names, decay flags", "[model][layout]") {
  const GptConfig cfg = gpt2::config(12, 768, 12, 50257, 1024);
  const ParamLayout layout(cfg);
  CHECK(model_params(cfg) == 124439808);
  CHECK(layout.size() == static_cast<size_t>(124439808 + (50304 - 50257) * 768));
  CHECK(layout.tensors().size() == 2 + 12 * 12 + 2);
  CHECK(layout.tensors().front().name == "wte");
  CHECK(layout.at("h.11.mlp.c_proj.weight").shape == std::vector<int64_t>{768, 3072});
  CHECK(layout.at("h.0.attn.c_attn.weight").shape == std::vector<int64_t>{2304, 768});
  CHECK(layout.at("wte").weight_decay);
  CHECK_FALSE(layout.at("h.3.ln_1.weight").weight_decay);
  CHECK_FALSE(layout.at("h.3.attn.c_attn.bias").weight_decay);
  size_t expect = 0;
  for (const auto& t : layout.tensors()) {
    CHECK(t.offset == expect);  // contiguous, no holes
    expect += t.numel;
  }
}

TEST_CASE("tp shard of c_attn holds its heads of q, k and v", "[model][layout]") {
  GptConfig cfg = gpt2::config(1, 8, 4, 37, 4);
  cfg.tp_size = 2;
  cfg.tp_rank = 1;
  cfg.padded_vocab = 0;
  cfg.finalize();
  const ParamLayout layout(cfg);
  const ParamTensor& qkv = layout.at("h.0.attn.c_attn.weight");
  CHECK(qkv.shape == std::vector<int64_t>{12, 8});
  CHECK(qkv.full_shape == std::vector<int64_t>{24, 8});
  // Full row 4 is q channel 4, the first channel of rank 1; full row 8 is k channel 0 (rank 0).
  CHECK(ParamLayout::shard_offset(qkv, 4 * 8 + 3) == static_cast<int64_t>(qkv.offset + 3));
  CHECK(ParamLayout::shard_offset(qkv, 8 * 8) == -1);
  CHECK(ParamLayout::shard_offset(qkv, 12 * 8) == static_cast<int64_t>(qkv.offset + 4 * 8));
  const ParamTensor& proj = layout.at("h.0.attn.c_proj.weight");
  CHECK(proj.split_dim == 1);
  CHECK(ParamLayout::shard_offset(proj, 1 * 8 + 5) == static_cast<int64_t>(proj.offset + 1 * 4 + 1));
  CHECK(layout.at("wte").shape == std::vector<int64_t>{64, 8});
}

TEST_CASE("invalid model configs are user errors naming the field", "[model][layout]") {
  GptConfig bad = GptConfig();
  bad.layers = 2;
  bad.hidden = 30;
  bad.heads = 4;
  bad.vocab = 37;
  bad.max_seq_len = 8;
  CHECK_THROWS_WITH(bad.finalize(), Catch::Contains("heads = 4") && Catch::Contains("divisor of hidden (30)"));
  bad.heads = 3;
  bad.tp_size = 2;
  CHECK_THROWS_AS(bad.finalize(), holmes::UserError);
  bad.tp_size = 1;
  bad.first_layer = 1;
  CHECK_THROWS_WITH(bad.finalize(), Catch::Contains("first_layer"));
}
