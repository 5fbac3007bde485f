// parallel.schedule: interleaved through the trainer: p ranks each hold V model chunks (one
// Gpt and one DistOptimizer per chunk, virtual stage c x p + s). Every chunk runs the
// arithmetic of the 1F1B stage that holds the same layers in a pipeline of p V stages, its
// DP reduction and update are that stage's, and the global norm adds the same per-layer
// units in the same order: so the losses, gradient norms, validation loss and every weight
// are 1f1b's over p V stages with the same cuts bit for bit, for each recompute mode and
// tensor x pipeline x data grid. Against 1f1b on p stages (other cuts) they must agree within
// dist_trainer_test's bounds: loss and validation loss rel 1e-5, gradient norm rel 1e-4,
// weights 2e-5 absolute (on these CPU runs they were bit for bit as well).
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <tuple>

#include "test/support/dist_test_util.hpp"
#include "test/support/compare.hpp"

using namespace holmes::parallel;
using namespace holmes::test;
using holmes::spec::Recompute;
using holmes::spec::Schedule;

namespace {

using Weights = std::map<std::tuple<int, int, std::string>, std::vector<float>>;  // (tp, dp, tensor)

Weights weights_of(const std::vector<RankRun>& runs) {
  Weights out;
  for (const RankRun& r : runs)
    for (const auto& [name, w] : r.by_name) {
      const auto key = std::make_tuple(r.tp_rank, r.dp_rank, name);
      REQUIRE(out.count(key) == 0);  // each tensor on one chunk of one stage
      out[key] = w;
    }
  return out;
}

// Interleaved (p stages x v chunks) under each recompute mode against 1f1b/none over p v
// stages (bit for bit) and over p stages (within the bounds above).
void check_interleaved(holmes::spec::JobSpec spec, Grid g, int v) {
  spec.parallel.schedule = Schedule::k1f1b;
  spec.train.recompute = Recompute::kNone;
  const int p = g.pp;
  Grid wide = g;
  wide.pp = p * v;
  const std::vector<RankRun> ref = run_grid(spec, wide), same_stages = run_grid(spec, g);
  const Weights ref_w = weights_of(ref), stages_w = weights_of(same_stages);
  spec.parallel.schedule = Schedule::kInterleaved;
  spec.parallel.virtual_stages = v;
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    INFO("interleaved V=" << v << ", train.recompute " << holmes::spec::to_string(r));
    spec.train.recompute = r;
    const std::vector<RankRun> got = run_grid(spec, g);
    REQUIRE(got.size() == same_stages.size());
    for (const RankRun& run : got) {
      INFO("stage " << run.pp_stage << " tp " << run.tp_rank << " dp " << run.dp_rank);
      CHECK(run.chunks == v);
      CHECK_THAT(run.numerics, Catch::Contains("schedule: interleaved"));
      REQUIRE(run.steps.size() == ref[0].steps.size());
      for (size_t s = 0; s < run.steps.size(); ++s) {
        INFO("step " << s);
        CHECK(run.steps[s].loss == ref[0].steps[s].loss);  // every rank reports the job's loss and norm
        CHECK(run.steps[s].grad_norm == ref[0].steps[s].grad_norm);
        CHECK(rel(run.steps[s].loss, same_stages[0].steps[s].loss) < 1e-5);
        CHECK(rel(run.steps[s].grad_norm, same_stages[0].steps[s].grad_norm) < 1e-4);
      }
      CHECK(run.eval == ref[0].eval);
      CHECK(rel(run.eval, same_stages[0].eval) < 1e-5);
    }
    const Weights w = weights_of(got);
    REQUIRE(w.size() == ref_w.size());
    CHECK(w == ref_w);  // bit for bit
    double max_abs = 0;
    REQUIRE(w.size() == stages_w.size());
    for (const auto& [key, values] : w) {
      const std::vector<float>& other = stages_w.at(key);
      REQUIRE(values.size() == other.size());
      for (size_t i = 0; i < values.size(); ++i) max_abs = std::max(max_abs, std::fabs(double(values[i]) - other[i]));
    }
    CHECK(max_abs < 2e-5);
  }
}

}  // namespace

TEST_CASE("interleaved trainer: pp=2 x V=2 gives 1f1b over 4 stages bit for bit, every recompute mode",
          "[train][dist][schedule][interleaved]") {
  auto spec = tiny_job();  // 4 layers: one per virtual stage
  spec.train.steps = 3;
  check_interleaved(spec, Grid{.pp = 2}, 2);
}

TEST_CASE("interleaved trainer: tp=2 x pp=2 x dp=2 (V=2) gives 1f1b over 4 stages bit for bit",
          "[train][dist][schedule][interleaved]") {
  auto spec = tiny_job();
  spec.train.steps = 2;
  spec.train.global_batch = 16;  // m = 4 per dp rank
  check_interleaved(spec, Grid{.tp = 2, .pp = 2, .dp = 2, .bucket_floats = 700}, 2);
}

TEST_CASE("interleaved trainer: pp=2 with 8 micro-batches, V=3 (uneven chunks) and V=4",
          "[train][dist][schedule][interleaved]") {
  auto spec = tiny_job(8);
  spec.train.steps = 2;
  spec.train.global_batch = 16;  // m = 8
  check_interleaved(spec, Grid{.pp = 2, .bucket_floats = 500}, 4);
  spec.model.layers = 7;  // 7 over 6 virtual stages: 2 1 1 1 1 1
  check_interleaved(spec, Grid{.pp = 2}, 3);
}

TEST_CASE("interleaved trainer: llama pp=2 x dp=2 (V=2, untied and tied head)", "[train][dist][schedule][interleaved]") {
  auto spec = tiny_job();
  spec.model.arch = "llama";
  spec.model.kv_heads = 2;
  spec.train.steps = 2;
  spec.train.global_batch = 16;
  for (bool tied : {false, true}) {
    INFO("tie_embeddings " << tied);
    spec.model.tie_embeddings = tied;
    check_interleaved(spec, Grid{.pp = 2, .dp = 2}, 2);
  }
}

namespace {

// A scratch folder of this test (mkdtemp), removed at the end of the scope.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "holmes_il_ckpt_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// The steps a resumed run took against the same steps of an uninterrupted run on every rank:
// bit for bit (`exact`) or within dist_trainer_test's bounds; and the final weights.
void check_continues(const std::vector<RankRun>& got, const std::vector<RankRun>& full, int64_t from, bool exact) {
  REQUIRE(got.size() == full.size());
  for (const RankRun& run : got) {
    INFO("stage " << run.pp_stage << " tp " << run.tp_rank << " dp " << run.dp_rank);
    CHECK(run.first_step == from);
    REQUIRE(run.steps.size() + from == full[0].steps.size());
    for (size_t i = 0; i < run.steps.size(); ++i) {
      INFO("step " << from + i);
      const StepStats& want = full[0].steps[from + i];
      if (exact) {
        CHECK(run.steps[i].loss == want.loss);
        CHECK(run.steps[i].grad_norm == want.grad_norm);
      } else {
        CHECK(rel(run.steps[i].loss, want.loss) < 1e-5);
        CHECK(rel(run.steps[i].grad_norm, want.grad_norm) < 1e-4);
      }
    }
    if (exact) CHECK(run.eval == full[0].eval);
    else CHECK(rel(run.eval, full[0].eval) < 1e-5);
  }
  const Weights w = weights_of(got), want = weights_of(full);
  REQUIRE(w.size() == want.size());
  double max_abs = 0;
  for (const auto& [key, values] : w) {
    const std::vector<float>& other = want.at(key);
    REQUIRE(values.size() == other.size());
    for (size_t i = 0; i < values.size(); ++i) max_abs = std::max(max_abs, std::fabs(double(values[i]) - other[i]));
  }
  if (exact) CHECK(max_abs == 0);
  else CHECK(max_abs < 2e-5);
}

}  // namespace

// Trainer::shard_states: one state per chunk into the rank's one file, loaded per chunk by
// tensor name. Resuming the interleaved run's checkpoint continues it bit for bit (on the CPU
// backend and through a device backend's host copies); the same checkpoint resumed as 1f1b,
// and a 1f1b one resumed as interleaved, continue within the bounds above (the two schedules
// cut the stages differently).
TEST_CASE("interleaved trainer: checkpoints of the model chunks resume exactly, and 1f1b <-> interleaved",
          "[train][dist][schedule][interleaved][checkpoint]") {
  auto il = tiny_job();  // 4 layers, pp2 x V2: one layer per chunk
  il.parallel.schedule = Schedule::kInterleaved;
  il.parallel.virtual_stages = 2;
  auto f1 = il;
  f1.parallel.schedule = Schedule::k1f1b;
  f1.parallel.virtual_stages = 0;  // auto
  const ScratchDir dir;
  const std::string il_dir = dir.path + "/il", f1_dir = dir.path + "/1f1b", dev_dir = dir.path + "/dev";
  const Grid g{.pp = 2, .dp = 2, .bucket_floats = 700};
  auto saving = [&](const std::string& to, bool device) {
    Grid s = g;
    s.save_dir = to;
    s.save_after = 3;
    s.device_memory = device;
    return s;
  };
  auto resuming = [&](const std::string& from, bool device) {
    Grid s = g;
    s.resume = checkpoint_step_dir(from, 3);
    s.device_memory = device;
    return s;
  };
  const std::vector<RankRun> il_full = run_grid(il, saving(il_dir, false)), f1_full = run_grid(f1, saving(f1_dir, false));
  for (const RankRun& r : il_full) REQUIRE(r.chunks == 2);
  const CheckpointInfo info = open_checkpoint(checkpoint_step_dir(il_dir, 3));
  CHECK(info.files.size() == 4);  // one file per rank, both chunks in it
  SECTION("interleaved from its own checkpoint: bit for bit") {
    check_continues(run_grid(il, resuming(il_dir, false)), il_full, 3, true);
  }
  SECTION("through a device backend's host copies of every chunk, saved and resumed") {
    const std::vector<RankRun> dev_full = run_grid(il, saving(dev_dir, true));
    check_continues(dev_full, il_full, 0, true);
    check_continues(run_grid(il, resuming(dev_dir, true)), il_full, 3, true);
  }
  SECTION("the interleaved checkpoint resumed as 1f1b, and a 1f1b one as interleaved") {
    check_continues(run_grid(f1, resuming(il_dir, false)), il_full, 3, false);
    check_continues(run_grid(il, resuming(f1_dir, false)), f1_full, 3, false);
  }
}
