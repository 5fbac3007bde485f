// The trainer with train.precision fp8 on the CPU, through the emulated kernels
// (test/support/emulated_bf16.hpp: bf16 storage, the host twins of the GPU's FP8 GEMMs):
//   - a tiny run whose losses track bf16 within a tolerance derived below;
//   - a checkpoint records the recipe, and a resume continues bit for bit (current scaling
//     keeps no state between steps);
//   - checkpoints move between fp8, bf16 and fp32 runs: the fp32 master weights and AdamW
//     moments load as saved, whatever the precision of the run that saved them;
//   - tp=2 x pp=2 (each shard scales its own slice) tracks the single-process fp8 run.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <vector>

#include <unistd.h>

#include "common/errors.hpp"
#include "engine/checkpoint/checkpoint.hpp"
#include "test/support/dist_test_util.hpp"
#include "test/support/compare.hpp"

using namespace holmes;
using namespace holmes::checkpoint;
using namespace holmes::data;
using namespace holmes::parallel;
using namespace holmes::test;

namespace {

spec::JobSpec job(spec::Precision p) {
  spec::JobSpec s = tiny_job();
  s.train.precision = p;
  s.train.steps = 12;
  return s;
}

// The tolerance of an fp8 loss against bf16's at the same step (and fp32's). FP8 rounds each
// GEMM operand by up to 2^-4 (E4M3) or 2^-3 (E5M2) of its value; on a GEMM output that is a
// few percent RMS at most, and the loss, a mean over B*T positions of a log-softmax, averages
// most of it away: at initialisation the two losses differ by 0.2% on a model with noisy
// weights (fp8_model_test), and over the 12 steps of this job by at most 0.025% (measured,
// the gradients' FP8 error steering the weights slightly apart). 0.5% is twenty times that
// and a thirtieth of the loss's own fall over the run (5.57 to 4.60); a missing unscale (a
// factor 2^k on a layer's output) or a wrong transpose moves the loss by tens of percent.
constexpr double kFp8VsBf16 = 5e-3;

std::string temp_root(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string(name) + "-" + std::to_string(::getpid()))).string();
}

SaveContext save_context(const spec::JobSpec& s, const Trainer& t, int64_t step) {
  SaveContext c;
  c.step = step;
  c.seed = s.job.seed;
  c.model = gpt_config_of(s);
  c.run_id = "fp8-test";
  c.precision = t.precision_record();
  return c;
}

}  // namespace

TEST_CASE("fp8 trainer: losses track bf16, the checkpoint records the recipe and resumes bit for bit",
          "[train][fp8]") {
  const spec::JobSpec f8 = job(spec::Precision::kFp8), b16 = job(spec::Precision::kBf16);
  auto data = DataSet::open(f8);
  model::Backend emu_b = model::test::emulated_bf16_backend(), emu = model::test::emulated_bf16_backend();
  Trainer half(b16, single_rank_plan(b16), emu_b, *data);
  Trainer t(f8, single_rank_plan(f8), emu, *data);
  CHECK(t.numerics().rfind("fp8 e4m3 weights/activations, e5m2 gradients", 0) == 0);
  CHECK(t.precision_record() == "fp8 e4m3/e5m2/current/head=bf16");
  // fp8 is bf16 activations under an FP8 recipe.
  CHECK(precision_of(f8.train.precision, emu) == DType::kBf16);
  REQUIRE(fp8_recipe_of(single_rank_plan(f8), emu).has_value());
  CHECK_FALSE(fp8_recipe_of(single_rank_plan(b16), emu).has_value());
  {
    // bf16 kernels without FP8 ones (a GPU before compute capability 8.9): exit 2 naming fp8.
    model::Backend no_fp8 = model::test::emulated_bf16_backend();
    static_cast<model::test::EmulatedBf16*>(no_fp8.kernels.get())->has_fp8 = false;
    CHECK(precision_of(b16.train.precision, no_fp8) == DType::kBf16);
    CHECK_THROWS_WITH(precision_of(f8.train.precision, no_fp8),
                      Catch::Contains("train.precision: 'fp8' needs FP8 GEMM kernels"));
    CHECK_THROWS_AS(Trainer(f8, single_rank_plan(f8), no_fp8, *data), UserError);
  }
  const auto* kernels = static_cast<const model::test::EmulatedBf16*>(emu.kernels.get());
  const std::string root = temp_root("holmes_fp8_trainer");
  std::filesystem::remove_all(root);
  std::vector<double> losses;
  double worst = 0;
  for (int64_t s = 0; s < f8.train.steps; ++s) {
    const double ref = half.train_step(s).loss;
    const StepStats st = t.train_step(s);
    INFO("step " << s << ": bf16 " << ref << ", fp8 " << st.loss);
    CHECK(std::isfinite(st.loss));
    CHECK(rel(st.loss, ref) < kFp8VsBf16);
    CHECK(st.loss != ref);  // FP8 really ran
    worst = std::max(worst, rel(st.loss, ref));
    losses.push_back(st.loss);
    if (s == 4) save_checkpoint(root, t.shard_state(), save_context(f8, t, 5));
  }
  WARN("fp8 vs bf16 over " << f8.train.steps << " steps: largest relative loss difference " << worst << "; fp8 loss "
                            << losses.front() << " -> " << losses.back());
  CHECK(kernels->fp8_calls > 0);
  CHECK(losses.back() < losses.front());  // it learns

  const CheckpointInfo info = open_checkpoint(checkpoint_step_dir(root, 5));
  CHECK(info.precision == "fp8 e4m3/e5m2/current/head=bf16");
  model::Backend emu2 = model::test::emulated_bf16_backend();
  Trainer again(f8, single_rank_plan(f8), emu2, *data);
  ShardState st = again.shard_state();
  load_shard_state(info, gpt_config_of(f8), st, /*with_optimizer=*/true);
  again.upload_shard_state();
  for (int64_t s = 5; s < f8.train.steps; ++s) {
    INFO("step " << s);
    CHECK(again.train_step(s).loss == losses[static_cast<size_t>(s)]);
  }
  std::filesystem::remove_all(root);
}

TEST_CASE("fp8 trainer: checkpoints move between fp8, bf16 and fp32 runs", "[train][fp8]") {
  const spec::Precision kinds[] = {spec::Precision::kFp8, spec::Precision::kBf16, spec::Precision::kFp32};
  const std::string root = temp_root("holmes_fp8_cross");
  for (spec::Precision from : kinds) {
    const spec::JobSpec src = job(from);
    auto data = DataSet::open(src);
    model::Backend b = from == spec::Precision::kFp32 ? backends::make_backend(backends::Device::kCpu)
                                                      : model::test::emulated_bf16_backend();
    Trainer saver(src, single_rank_plan(src), b, *data);
    for (int64_t s = 0; s < 3; ++s) saver.train_step(s);
    std::filesystem::remove_all(root);
    save_checkpoint(root, saver.shard_state(), save_context(src, saver, 3));
    const CheckpointInfo info = open_checkpoint(checkpoint_step_dir(root, 3));
    const double next_loss = saver.train_step(3).loss;  // the saving run's own step 3
    for (spec::Precision to : kinds) {
      const spec::JobSpec dst = job(to);
      INFO(info.precision << " -> " << spec::to_string(to));
      model::Backend b2 = to == spec::Precision::kFp32 ? backends::make_backend(backends::Device::kCpu)
                                                       : model::test::emulated_bf16_backend();
      Trainer loader(dst, single_rank_plan(dst), b2, *data);
      ShardState st = loader.shard_state();
      load_shard_state(info, gpt_config_of(dst), st, /*with_optimizer=*/true);
      loader.upload_shard_state();
      // Master weights and moments arrive as saved, bit for bit, whatever either precision.
      const ShardState back = loader.shard_state();
      for (const model::ParamTensor& t : back.layout->tensors()) {
        const std::vector<float> saved = read_full_tensor(info, t.name);
        for (size_t i = 0; i < t.numel; ++i) REQUIRE(back.params[t.offset + i] == saved[i]);
        const std::vector<float> m = read_full_tensor(info, t.name, TensorKind::kExpAvg);
        for (size_t i = 0; i < t.numel; ++i) REQUIRE(back.exp_avg[t.offset + i] == m[i]);
      }
      // And the run continues from them: step 3 in the loader's numerics, within the
      // distance between the two precisions of the saver's own step 3.
      const double loss = loader.train_step(3).loss;
      CHECK(std::isfinite(loss));
      CHECK(rel(loss, next_loss) < (from == to ? 0.0 : kFp8VsBf16) + 1e-12);
    }
  }
  std::filesystem::remove_all(root);
}

TEST_CASE("fp8 trainer: tp=2 x pp=2 tracks the single-process fp8 run", "[train][fp8][dist][tp]") {
  spec::JobSpec f8 = job(spec::Precision::kFp8);
  f8.train.steps = 6;
  auto data = DataSet::open(f8);
  model::Backend emu = model::test::emulated_bf16_backend();
  Trainer one(f8, single_rank_plan(f8), emu, *data);
  std::vector<double> ref;
  for (int64_t s = 0; s < f8.train.steps; ++s) ref.push_back(one.train_step(s).loss);
  const std::vector<RankRun> runs = run_grid(f8, {.tp = 2, .pp = 2, .bucket_floats = 3000, .bf16 = true});
  for (const RankRun& r : runs) {
    if (r.pp_stage != 1) continue;  // the last stage reports the loss
    for (size_t s = 0; s < ref.size(); ++s) {
      INFO("rank tp" << r.tp_rank << " step " << s << ": " << r.steps[s].loss << " vs " << ref[s]);
      // Each TP shard casts its own slice with its own scale, and sums partial outputs
      // rounded to bf16: FP8 agreement, not bits.
      CHECK(rel(r.steps[s].loss, ref[s]) < kFp8VsBf16);
    }
  }
}

TEST_CASE("pipe_fp8: pp=2 with FP8 sends tracks pp=2 without, fp32 and bf16", "[train][fp8][dist]") {
  for (spec::Precision p : {spec::Precision::kFp32, spec::Precision::kBf16}) {
    spec::JobSpec plain = job(p);
    plain.train.steps = 6;
    spec::JobSpec fp8 = plain;
    fp8.parallel.pipe_fp8 = spec::PipeFp8::kOn;
    const bool emulated = p != spec::Precision::kFp32;
    const std::vector<RankRun> ref = run_grid(plain, {.pp = 2, .dp = 2, .bucket_floats = 3000, .bf16 = emulated});
    const std::vector<RankRun> runs = run_grid(fp8, {.pp = 2, .dp = 2, .bucket_floats = 3000, .bf16 = emulated});
    for (size_t i = 0; i < runs.size(); ++i) {
      if (runs[i].pp_stage != 1) continue;
      for (size_t s = 0; s < runs[i].steps.size(); ++s) {
        INFO(spec::to_string(p) << " rank " << i << " step " << s << ": " << runs[i].steps[s].loss << " vs "
                                << ref[i].steps[s].loss);
        // One E4M3 rounding of the activations and one E5M2 rounding of their gradients at
        // the stage boundary: the loss moves by a small fraction of fp8's own tolerance.
        CHECK(rel(runs[i].steps[s].loss, ref[i].steps[s].loss) < kFp8VsBf16);
        if (s > 0) CHECK(runs[i].steps[s].loss != ref[i].steps[s].loss);  // the sends really were FP8
      }
    }
  }
}
