// The planner's memory model (engine/plan/model_size.hpp: what a block and a stage keep per
// micro-batch under each recompute mode, from model::layer_buffers) against what model::Gpt
// allocates: the planner sums the same buffer table without the model's 256-byte rounding and
// with the attention it presumes for the precision (fp32: the exact form, as the CPU's).
#include <catch2/catch.hpp>

#include <utility>

#include "engine/plan/model_size.hpp"
#include "model/backend.hpp"
#include "model/cpu/cpu_kernels.hpp"
#include "model/cpu/host_memory.hpp"
#include "model/gpt.hpp"
#include "model/gpt_config.hpp"
#include "model/gpt2/gpt2.hpp"
#include "model/llama/llama.hpp"

using namespace holmes;

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
  const model::GptConfig llama = model::llama::config(4, 64, 4, 2, 96, 300, 64);
  const model::GptConfig gpt2 = model::gpt2::config(4, 64, 4, 300, 64);
  for (const model::GptConfig& config : {llama, gpt2})
    for (int tp : {1, 2})
      for (const auto& [spec_mode, model_mode] : modes)
        for (bool split : {false, true}) {
          CAPTURE(config.to_string(), tp, spec::to_string(spec_mode), split);
          Rank0 comm(tp);
          const model::ActivationPolicy policy{model_mode, split};
          const plan::ActivationMode mode{spec_mode, split};
          // Per layer: the slot's share of one layer.
          const model::GptConfig mid = config.shard(tp, 0, 1, 2);
          model::Gpt g(mid, backend, B, T, &comm, 1, holmes::DType::kF32, policy);
          const double formula = plan::block_activation_bytes(config, T, B, tp, 4, mode);
          CHECK(double(g.layer_slot_bytes()) >= formula);
          CHECK(double(g.layer_slot_bytes()) <= formula + 17 * 256);
          // Per slot, with the head and embedding: two slots minus one.
          for (const auto& [first, last] : {std::pair{true, false}, std::pair{false, true}}) {
            const model::GptConfig c = first ? config.shard(tp, 0, 0, 2) : config.shard(tp, 0, 2);
            model::Gpt one(c, backend, B, T, &comm, 1, holmes::DType::kF32, policy);
            model::Gpt two(c, backend, B, T, &comm, 2, holmes::DType::kF32, policy);
            const double slot = double(two.activation_bytes()) - double(one.activation_bytes());
            const double want = 2 * plan::block_activation_bytes(config, T, B, tp, 4, mode) +
                                plan::stage_extra_activation_bytes(config, T, B, tp, 4, mode, first, last);
            CHECK(slot >= want);
            CHECK(slot <= want + (2 * 17 + 12) * 256);
          }
          // The replayed layer: what the one-slot model holds beyond its slot and the scratch of
          // a model that replays nothing.
          model::Gpt none(mid, backend, B, T, &comm, 1, holmes::DType::kF32, {model::Recompute::kNone, split});
          const double work = double(g.activation_bytes()) - 2 * double(g.layer_slot_bytes()) -
                              (double(none.activation_bytes()) - 2 * double(none.layer_slot_bytes()));
          const double want_work = plan::recompute_work_bytes(config, T, B, tp, 4, mode);
          CHECK(work >= want_work);
          CHECK(work <= want_work + 17 * 256);
        }
}

TEST_CASE("model size: a document-masked bf16 model is priced as the fused attention, plus one bias per rank") {
  // cuDNN's fused attention masks documents in its graph (cuda/cudnn_sdpa.hpp), keeping fp32
  // softmax statistics per query row as without the mask, and replays nothing under selective
  // recompute; a rank may hold one (B, T, T) bf16 bias for it.
  const model::GptConfig config = model::llama::config(4, 256, 8, 4, 512, 1000, 512);
  const int64_t B = 2, T = 512;
  for (int tp : {1, 2}) {
    CAPTURE(tp);
    plan::ActivationMode fused{spec::Recompute::kNone}, masked{spec::Recompute::kNone};
    masked.document_mask = true;
    for (int bytes : {2, 4})
      CHECK(plan::block_activation_bytes(config, T, B, tp, bytes, masked) ==
            plan::block_activation_bytes(config, T, B, tp, bytes, fused));
    CHECK(plan::document_bias_bytes(T, B, 2, masked) == B * T * T * 2);
    CHECK(plan::document_bias_bytes(T, B, 2, fused) == 0);
    CHECK(plan::document_bias_bytes(T, B, 4, masked) == 0);  // fp32 runs the exact form, masked in its softmax
    fused.recompute = masked.recompute = spec::Recompute::kSelective;
    CHECK(plan::recompute_flops_per_token(config, T, tp, 2, fused) == 0);
    CHECK(plan::recompute_flops_per_token(config, T, tp, 2, masked) == 0);
    CHECK(plan::recompute_flops_per_token(config, T, tp, 4, masked) == Approx(4.0 * T * 256 / tp));
  }
}
