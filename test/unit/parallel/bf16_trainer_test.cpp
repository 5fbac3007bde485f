// The trainer in bf16 mixed precision, on the CPU through kernels that emulate bf16 storage
// (test/support/emulated_bf16.hpp): what the GPU path does around its kernels (the bf16
// weight copy refreshed after every optimizer step and checkpoint load, fp32 stage
// boundaries, fp32 gradients through the distributed optimizer) checked without a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <vector>

#include <unistd.h>

#include "engine/checkpoint/checkpoint.hpp"
#include "test/support/dist_test_util.hpp"
#include "test/support/rank_plans.hpp"
#include "test/support/compare.hpp"

using namespace holmes;
using namespace holmes::checkpoint;
using namespace holmes::data;
using namespace holmes::parallel;
using namespace holmes::test;

namespace {

spec::JobSpec bf16_job() {
  spec::JobSpec s = tiny_job();
  s.train.precision = holmes::spec::Precision::kBf16;
  return s;
}

}  // namespace

TEST_CASE("bf16 trainer: losses track fp32, and a checkpoint resumes bit for bit", "[train][bf16]") {
  const spec::JobSpec half = bf16_job();
  const Reference full = run_reference(tiny_job());
  auto data = DataSet::open(half);
  model::Backend emu = model::test::emulated_bf16_backend();
  Trainer t(half, single_rank_plan(half), emu, *data);
  CHECK(t.numerics().rfind("bf16", 0) == 0);
  std::vector<double> losses;
  // One folder per process: two suites running at once (two checkouts) must not share it.
  const std::string root =
      (std::filesystem::temp_directory_path() / ("holmes_bf16_trainer-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(root);
  for (int64_t s = 0; s < half.train.steps; ++s) {
    const StepStats st = t.train_step(s);
    INFO("step " << s << ": fp32 " << full.steps[s].loss << ", bf16 " << st.loss);
    CHECK(rel(st.loss, full.steps[s].loss) < 2e-2);
    if (s > 0) CHECK(st.loss != full.steps[s].loss);  // the copy really is bf16
    losses.push_back(st.loss);
    if (s == 2) {
      SaveContext c;
      c.step = 3;
      c.seed = half.job.seed;
      c.model = gpt_config_of(half);
      c.run_id = "bf16-test";
      save_checkpoint(root, t.shard_state(), c);
    }
  }
  // A fresh trainer loads step 3 (master weights and moments) and must refresh its bf16 copy
  // from them: the same losses, bit for bit.
  model::Backend emu2 = model::test::emulated_bf16_backend();
  Trainer again(half, single_rank_plan(half), emu2, *data);
  ShardState st = again.shard_state();
  load_shard_state(open_checkpoint(checkpoint_step_dir(root, 3)), gpt_config_of(half), st, /*with_optimizer=*/true);
  again.upload_shard_state();
  for (int64_t s = 3; s < half.train.steps; ++s) {
    INFO("step " << s);
    CHECK(again.train_step(s).loss == losses[static_cast<size_t>(s)]);
  }
  std::filesystem::remove_all(root);
}

TEST_CASE("bf16 trainer: pp=2 x dp=2 tracks the single-process bf16 run", "[train][bf16][dist]") {
  const spec::JobSpec half = bf16_job();
  auto data = DataSet::open(half);
  model::Backend emu = model::test::emulated_bf16_backend();
  Trainer one(half, single_rank_plan(half), emu, *data);
  std::vector<double> ref;
  for (int64_t s = 0; s < half.train.steps; ++s) ref.push_back(one.train_step(s).loss);
  const std::vector<RankRun> runs = run_grid(half, {.pp = 2, .dp = 2, .bucket_floats = 3000, .bf16 = true});
  for (const RankRun& r : runs) {
    for (size_t s = 0; s < ref.size(); ++s) {
      INFO("rank pp" << r.pp_stage << " dp" << r.dp_rank << " step " << s);
      // The DP sum adds the fp32 gradients in another order, so the bf16 copies may round
      // differently: bf16 agreement, not bits.
      CHECK(rel(r.steps[s].loss, ref[s]) < 1e-2);
    }
  }
  // The bf16 weights are refreshed bucket by bucket as the deferred all-gathers land: with
  // all-gathers that start late the numbers are the same bits.
  const std::vector<RankRun> slow =
      run_grid(half, {.pp = 2, .dp = 2, .bucket_floats = 3000, .bf16 = true, .slow_gather_ms = 15});
  for (size_t i = 0; i < runs.size(); ++i) {
    INFO("rank " << i);
    for (size_t s = 0; s < ref.size(); ++s) {
      CHECK(slow[i].steps[s].loss == runs[i].steps[s].loss);
      CHECK(slow[i].steps[s].grad_norm == runs[i].steps[s].grad_norm);
    }
    CHECK(slow[i].params == runs[i].params);
    CHECK(slow[i].gathers_deferred == static_cast<int>(slow[i].bucket_count));
  }
}

TEST_CASE("bf16 trainer: tp=2 (fp32 sums of the bf16 shards) and tp=2 x pp=2 track the single-process bf16 run",
          "[train][bf16][dist][tp]") {
  const spec::JobSpec half = bf16_job();
  auto data = DataSet::open(half);
  model::Backend emu = model::test::emulated_bf16_backend();
  Trainer one(half, single_rank_plan(half), emu, *data);
  std::vector<double> ref, ref_norm;
  for (int64_t s = 0; s < half.train.steps; ++s) {
    const auto st = one.train_step(s);
    ref.push_back(st.loss);
    ref_norm.push_back(st.grad_norm);
  }
  for (const Grid& g : {Grid{.tp = 2, .bf16 = true}, Grid{.tp = 2, .pp = 2, .bucket_floats = 3000, .bf16 = true}}) {
    const std::vector<RankRun> runs = run_grid(half, g);
    for (const RankRun& r : runs) {
      if (r.pp_stage != g.pp - 1) continue;  // the last stage reports the loss
      for (size_t s = 0; s < ref.size(); ++s) {
        INFO("tp " << g.tp << " pp " << g.pp << ": rank tp" << r.tp_rank << " pp" << r.pp_stage << " step " << s
                   << ": norm " << r.steps[s].grad_norm << " vs " << ref_norm[s]);
        // Each shard rounds its partial output to bf16 before the sum: bf16 agreement, not bits.
        CHECK(rel(r.steps[s].loss, ref[s]) < 1e-2);
        CHECK(rel(r.steps[s].grad_norm, ref_norm[s]) < 2e-2);
      }
    }
    // The TP ranks of a stage agree exactly (the same sums, reduced once).
    for (const RankRun& a : runs)
      for (const RankRun& b : runs)
        if (a.pp_stage == b.pp_stage && a.dp_rank == b.dp_rank && a.pp_stage == g.pp - 1)
          for (size_t s = 0; s < ref.size(); ++s) CHECK(a.steps[s].loss == b.steps[s].loss);
  }
}
