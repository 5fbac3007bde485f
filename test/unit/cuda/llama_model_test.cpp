// A Llama-family model (model.arch: llama) on the GPU (the CUDA backend behind the one Trainer)
// against the CPU backend: 10 fp32 steps and the validation loss, and bf16 mixed precision
// tracking GPU fp32 and resuming bit for bit. Grouped-query heads (4 on 2, HS 32: cuDNN takes
// bf16 attention at T = 128), an untied head, the ops of test/unit/cuda/llama_parity_test.cpp
// composed as llama_block.cpp runs them. Skips without a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "backends/backends.hpp"
#include "cuda_test_util.hpp"
#include "engine/checkpoint/checkpoint.hpp"
#include "engine/data/data.hpp"
#include "engine/parallel/trainer.hpp"
#include "test/support/rank_plans.hpp"
#include "test/support/compare.hpp"

using namespace holmes;
using namespace holmes::parallel;
using holmes::test::single_rank_plan;
using holmes::test::rel;

namespace {

spec::JobSpec llama_job() {
  spec::JobSpec s;
  s.job.seed = 5;
  s.model.arch = "llama";
  s.model.layers = 2;
  s.model.hidden = 128;
  s.model.heads = 4;
  s.model.kv_heads = 2;
  s.model.ffn_hidden = 192;
  s.model.rope_theta = 10000;
  s.model.vocab_size = 257;
  s.model.max_seq_len = 128;
  s.data.source = spec::DataSource::kSynthetic;
  s.data.synthetic.tokens = 60'000;
  s.train.steps = 12;
  s.train.micro_batch = 2;
  s.train.global_batch = 4;
  s.train.seq_len = 128;
  s.train.lr = 3e-3;
  s.train.min_lr = 3e-4;
  s.train.warmup_steps = 2;
  s.train.grad_clip = 1.0;
  s.train.eval_steps = 2;
  s.train.precision = spec::Precision::kFp32;
  return s;
}

}  // namespace

TEST_CASE("llama whole model: fp32 steps on the GPU match the CPU backend", "[cuda][model][llama]") {
  if (!cuda::test::gpu_or_skip()) return;
  const spec::JobSpec spec = llama_job();
  auto data = data::DataSet::open(spec);
  model::Backend cpu = backends::make_backend(backends::Device::kCpu), gpu = backends::make_backend(backends::Device::kCuda);
  Trainer a(spec, single_rank_plan(spec), cpu, *data), b(spec, single_rank_plan(spec), gpu, *data);
  for (int64_t s = 0; s < 10; ++s) {
    const StepStats sa = a.train_step(s), sb = b.train_step(s);
    INFO("step " << s << ": cpu loss " << sa.loss << " gpu " << sb.loss);
    CHECK(rel(sb.loss, sa.loss) < 1e-4);
    CHECK(rel(sb.grad_norm, sa.grad_norm) < 1e-3);
  }
  CHECK(rel(b.evaluate(), a.evaluate()) < 1e-4);
}

TEST_CASE("llama whole model: bf16 on the GPU tracks fp32 and resumes bit for bit", "[cuda][model][llama]") {
  if (!cuda::test::gpu_or_skip()) return;
  const spec::JobSpec fp32 = llama_job();
  spec::JobSpec bf16 = fp32;
  bf16.train.precision = spec::Precision::kBf16;
  auto data = data::DataSet::open(fp32);
  model::Backend gpu = backends::make_backend(backends::Device::kCuda);
  Trainer full(fp32, single_rank_plan(fp32), gpu, *data), half(bf16, single_rank_plan(bf16), gpu, *data);
  std::printf("llama bf16 numerics: %s\n", half.numerics().c_str());
  const std::string root = (std::filesystem::temp_directory_path() / "holmes_gpu_llama_bf16").string();
  std::filesystem::remove_all(root);
  std::vector<double> losses;
  std::string at6;
  for (int64_t s = 0; s < 10; ++s) {
    const StepStats sf = full.train_step(s), sh = half.train_step(s);
    INFO("step " << s << ": fp32 loss " << sf.loss << " bf16 " << sh.loss);
    CHECK(rel(sh.loss, sf.loss) < 2e-2);
    losses.push_back(sh.loss);
    if (s == 5) {
      checkpoint::SaveContext c;
      c.step = 6;
      c.seed = bf16.job.seed;
      c.model = gpt_config_of(bf16);
      c.run_id = "gpu-llama";
      checkpoint::save_checkpoint(root, half.shard_state(), c);
      at6 = checkpoint::checkpoint_step_dir(root, 6);
    }
  }
  CHECK(rel(half.evaluate(), full.evaluate()) < 2e-2);
  Trainer again(bf16, single_rank_plan(bf16), gpu, *data);
  checkpoint::ShardState st = again.shard_state();
  checkpoint::load_shard_state(checkpoint::open_checkpoint(at6), gpt_config_of(bf16), st, /*with_optimizer=*/true);
  again.upload_shard_state();
  for (int64_t s = 6; s < 10; ++s) {
    INFO("step " << s);
    CHECK(again.train_step(s).loss == losses[static_cast<size_t>(s)]);
  }
  std::filesystem::remove_all(root);
}
