// The whole model on the GPU (the CUDA backend behind the one Trainer) against the CPU
// backend: 10 fp32 steps, the validation loss, and checkpoints that move between the two;
// bf16 mixed precision against GPU fp32, a bit-identical bf16 resume on the GPU, and a bf16
// GPU checkpoint continued on the CPU. Skips without a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <vector>

#include "cuda_test_util.hpp"
#include "engine/checkpoint/checkpoint.hpp"
#include "engine/data/data.hpp"
#include "engine/parallel/trainer.hpp"
#include "test/support/rank_plans.hpp"
#include "backends/backends.hpp"
#include "test/support/compare.hpp"

using namespace holmes;
using namespace holmes::checkpoint;
using namespace holmes::data;
using namespace holmes::parallel;
using holmes::test::single_rank_plan;
using holmes::test::rel;

namespace {

// L=2 C=64 NH=4 (HS 16), V=257 byte-level, T=37 (odd: crosses warps), 2 micro-batches of 3.
spec::JobSpec gpu_job() {
  spec::JobSpec s;
  s.job.seed = 5;
  s.model.layers = 2;
  s.model.hidden = 64;
  s.model.heads = 4;
  s.model.vocab_size = 257;
  s.model.max_seq_len = 64;
  s.data.source = holmes::spec::DataSource::kSynthetic;
  s.data.synthetic.tokens = 60'000;
  s.train.steps = 12;
  s.train.micro_batch = 3;
  s.train.global_batch = 6;
  s.train.seq_len = 37;
  s.train.lr = 3e-3;
  s.train.min_lr = 3e-4;
  s.train.warmup_steps = 2;
  s.train.grad_clip = 1.0;
  s.train.eval_steps = 2;
  s.train.precision = holmes::spec::Precision::kFp32;
  return s;
}

// Saves `t`'s shard (a host view, whatever its backend) as step `step` under `root`.
std::string save(Trainer& t, const spec::JobSpec& spec, int64_t step, const std::string& root) {
  SaveContext c;
  c.step = step;
  c.seed = spec.job.seed;
  c.model = gpt_config_of(spec);
  c.run_id = "gpu-test";
  save_checkpoint(root, t.shard_state(), c);
  return checkpoint_step_dir(root, step);
}

void load(Trainer& t, const spec::JobSpec& spec, const std::string& dir) {
  ShardState st = t.shard_state();
  load_shard_state(open_checkpoint(dir), gpt_config_of(spec), st, /*with_optimizer=*/true);
  t.upload_shard_state();
}

}  // namespace

TEST_CASE("whole model: fp32 steps on the GPU match the CPU backend, and checkpoints move between them",
          "[cuda][model]") {
  if (!cuda::test::gpu_or_skip()) return;
  const spec::JobSpec spec = gpu_job();
  auto data = DataSet::open(spec);
  model::Backend cpu = holmes::backends::make_backend(holmes::backends::Device::kCpu), gpu = holmes::backends::make_backend(holmes::backends::Device::kCuda);
  Trainer a(spec, single_rank_plan(spec), cpu, *data), b(spec, single_rank_plan(spec), gpu, *data);
  for (int64_t s = 0; s < 10; ++s) {
    const StepStats sa = a.train_step(s), sb = b.train_step(s);
    INFO("step " << s << ": cpu loss " << sa.loss << " gpu " << sb.loss);
    CHECK(rel(sb.loss, sa.loss) < 1e-4);
    CHECK(rel(sb.grad_norm, sa.grad_norm) < 1e-3);
  }
  CHECK(rel(b.evaluate(), a.evaluate()) < 1e-4);

  // GPU checkpoint -> CPU resume, and the CPU's back onto a fresh GPU trainer.
  const std::string root = (std::filesystem::temp_directory_path() / "holmes_gpu_whole_model").string();
  std::filesystem::remove_all(root);
  const std::string from_gpu = save(b, spec, 10, root + "/gpu");
  const std::string from_cpu = save(a, spec, 10, root + "/cpu");
  Trainer c(spec, single_rank_plan(spec), cpu, *data), d(spec, single_rank_plan(spec), gpu, *data);
  load(c, spec, from_gpu);
  load(d, spec, from_cpu);
  for (int64_t s = 10; s < 12; ++s) {
    const StepStats sa = a.train_step(s), sb = b.train_step(s), sc = c.train_step(s), sd = d.train_step(s);
    INFO("step " << s);
    CHECK(rel(sc.loss, sb.loss) < 1e-4);  // the GPU run, continued on the CPU
    CHECK(rel(sd.loss, sa.loss) < 1e-4);  // the CPU run, continued on the GPU
    CHECK(rel(sd.loss, sc.loss) < 2e-4);
  }
  std::filesystem::remove_all(root);
}

TEST_CASE("whole model: bf16 on the GPU tracks fp32, resumes bit for bit, and its checkpoint continues on the CPU",
          "[cuda][model]") {
  if (!cuda::test::gpu_or_skip()) return;
  const spec::JobSpec fp32 = gpu_job();
  spec::JobSpec bf16 = fp32;
  bf16.train.precision = holmes::spec::Precision::kBf16;
  auto data = DataSet::open(fp32);
  model::Backend cpu = holmes::backends::make_backend(holmes::backends::Device::kCpu), gpu = holmes::backends::make_backend(holmes::backends::Device::kCuda);
  REQUIRE(precision_of(bf16.train.precision, gpu) == holmes::DType::kBf16);
  REQUIRE(precision_of(gpu_job().train.precision, gpu) == holmes::DType::kF32);
  Trainer full(fp32, single_rank_plan(fp32), gpu, *data), half(bf16, single_rank_plan(bf16), gpu, *data);
  std::vector<double> losses;
  const std::string root = (std::filesystem::temp_directory_path() / "holmes_gpu_bf16").string();
  std::filesystem::remove_all(root);
  std::string at6;
  for (int64_t s = 0; s < 10; ++s) {
    const StepStats sf = full.train_step(s), sh = half.train_step(s);
    INFO("step " << s << ": fp32 loss " << sf.loss << " bf16 " << sh.loss);
    CHECK(rel(sh.loss, sf.loss) < 2e-2);  // llm.c accepts 5e-2 for bf16
    losses.push_back(sh.loss);
    if (s == 5) at6 = save(half, bf16, 6, root + "/bf16");
  }
  CHECK(rel(half.evaluate(), full.evaluate()) < 2e-2);

  // Resume on the GPU from the step-6 checkpoint: the same losses, bit for bit.
  Trainer again(bf16, single_rank_plan(bf16), gpu, *data);
  load(again, bf16, at6);
  for (int64_t s = 6; s < 10; ++s) {
    const StepStats sa = again.train_step(s);
    INFO("step " << s);
    CHECK(sa.loss == losses[static_cast<size_t>(s)]);
  }

  // The bf16 checkpoint (fp32 master weights and moments) continues on the CPU in fp32.
  spec::JobSpec on_cpu = bf16;
  on_cpu.train.precision = holmes::spec::Precision::kAuto;
  REQUIRE(precision_of(on_cpu.train.precision, cpu) == holmes::DType::kF32);
  Trainer c(on_cpu, single_rank_plan(on_cpu), cpu, *data), g(bf16, single_rank_plan(bf16), gpu, *data);
  load(c, on_cpu, at6);
  load(g, bf16, at6);
  for (int64_t s = 6; s < 8; ++s) {
    const StepStats sc = c.train_step(s), sg = g.train_step(s);
    INFO("step " << s << ": cpu " << sc.loss << " gpu bf16 " << sg.loss);
    CHECK(rel(sc.loss, sg.loss) < 2e-2);
  }
  std::filesystem::remove_all(root);
}
