// Trainer against the single-process Trainer: tensor, pipeline and data parallel runs of
// the same tiny job must give the same per-step losses, gradient norms, validation loss and
// final parameters; the tied wte copies stay bit-identical.
#include <catch2/catch.hpp>

#include <cmath>

#include "test/support/dist_test_util.hpp"
#include "test/support/compare.hpp"

using namespace holmes::data;
using namespace holmes::parallel;
using namespace holmes::test;

namespace {

// Largest |shard - reference| over every element any rank holds, and whether every
// element of the reference is held somewhere.
struct ParamDiff {
  double max_abs = 0;
  size_t uncovered = 0;
};

ParamDiff compare_params(const Reference& ref, const std::vector<RankRun>& runs) {
  ParamDiff d;
  for (const auto& t : ref.layout.tensors()) {
    for (size_t i = 0; i < t.numel; ++i) {
      bool held = false;
      for (const RankRun& r : runs) {
        for (const auto& st : r.layout.tensors()) {  // "wte" twice on a tied last stage
          if (st.name != t.name) continue;
          const int64_t off = holmes::model::ParamLayout::shard_offset(st, static_cast<int64_t>(i));
          if (off < 0) continue;
          held = true;
          d.max_abs = std::max(d.max_abs, std::fabs(double(r.params[off]) - ref.params[t.offset + i]));
        }
      }
      d.uncovered += !held;
    }
  }
  return d;
}


void check_run(const holmes::spec::JobSpec& spec, const Grid& g) {
  // Validation reads eval_steps global batches whatever the plan: the reference validates
  // on the very same sequences.
  const Reference ref = run_reference(spec);
  const std::vector<RankRun> runs = run_grid(spec, g);
  INFO("grid tp=" << g.tp << " pp=" << g.pp << " dp=" << g.dp);
  for (const RankRun& r : runs) {
    REQUIRE(r.steps.size() == ref.steps.size());
    for (size_t s = 0; s < ref.steps.size(); ++s) {
      INFO("rank tp" << r.tp_rank << " pp" << r.pp_stage << " dp" << r.dp_rank << " step " << s << ": loss "
                     << r.steps[s].loss << " vs " << ref.steps[s].loss << ", norm " << r.steps[s].grad_norm << " vs "
                     << ref.steps[s].grad_norm);
      CHECK(rel(r.steps[s].loss, ref.steps[s].loss) < 1e-5);
      CHECK(rel(r.steps[s].grad_norm, ref.steps[s].grad_norm) < 1e-4);
      CHECK(r.steps[s].lr == ref.steps[s].lr);
      // Every rank returns the very same numbers.
      CHECK(r.steps[s].loss == runs[0].steps[s].loss);
      CHECK(r.steps[s].grad_norm == runs[0].steps[s].grad_norm);
      if (g.world() > 1) CHECK(r.steps[s].comm_ms > 0);
      // The phases are disjoint spans of the step, one after another: each is there, and
      // together they fit in it (a phase timed twice or outside the step would not).
      const StepStats& st = r.steps[s];
      CHECK(st.pipeline_ms > 0);
      CHECK(st.grad_sync_ms >= 0);
      CHECK(st.job_sum_ms >= 0);
      CHECK(st.update_ms > 0);
      CHECK(st.pipeline_ms + st.grad_sync_ms + st.job_sum_ms + st.update_ms <= st.step_ms);
      // Inside the pipeline phase, apart: the passes and the waits for the neighbouring stages.
      CHECK(st.passes_ms > 0);
      CHECK(st.pipeline_wait_ms >= 0);
      if (g.pp == 1) CHECK(st.pipeline_wait_ms == 0);
      CHECK(st.passes_ms + st.pipeline_wait_ms <= st.pipeline_ms);
    }
    CHECK(rel(r.eval, ref.eval) < 1e-5);
    CHECK(r.eval == runs[0].eval);
  }
  // Clipping was active, so the comparison covers the global norm's use.
  CHECK(ref.steps.front().grad_norm > spec.train.grad_clip);
  const ParamDiff d = compare_params(ref, runs);
  CHECK(d.uncovered == 0);
  INFO("max |param - reference| = " << d.max_abs);
  CHECK(d.max_abs < 2e-5);
  // Tied embedding: the last stage's copy equals the first stage's wte bit for bit.
  if (g.pp > 1) {
    for (const RankRun& last : runs) {
      if (last.pp_stage != g.pp - 1) continue;
      const RankRun& first = runs[g.rank(last.tp_rank, last.dp_rank, 0)];
      const auto& a = first.layout.at("wte");
      const auto& b = last.layout.at("wte");
      REQUIRE(b.tied_copy);
      CHECK(std::equal(first.params.begin() + a.offset, first.params.begin() + a.offset + a.numel,
                       last.params.begin() + b.offset));
    }
  }
  // Overlap: with dp > 1 every bucket but a tied embedding one (it waits for the sum over
  // the embedding group) is reduce-scattered while backward still runs.
  for (const RankRun& r : runs) {
    const bool deferred = g.pp > 1 && r.layout.find("wte") != nullptr;
    CHECK(r.overlapped == (g.dp > 1 ? static_cast<int>(r.bucket_count) - (deferred ? 1 : 0) : 0));
    if (g.dp > 1 && g.bucket_floats > 0) CHECK(r.bucket_count > 3);
  }
  // On host groups the parameter all-gathers of each update land during the next forward
  // (here the evaluation's), every bucket once.
  for (const RankRun& r : runs) CHECK(r.gathers_deferred == (g.dp > 1 ? static_cast<int>(r.bucket_count) : 0));
  // DP replicas hold identical shards after the all-gather.
  for (const RankRun& r : runs)
    CHECK(r.params == runs[g.rank(r.tp_rank, 0, r.pp_stage)].params);
}

}  // namespace

TEST_CASE("Trainer on one rank matches the single-process trainer", "[train][dist]") {
  check_run(tiny_job(), {});
}

TEST_CASE("Trainer tp=2 matches the single-process trainer", "[train][dist]") {
  check_run(tiny_job(), {.tp = 2});
}

TEST_CASE("Trainer pp=2 matches the single-process trainer", "[train][dist]") {
  check_run(tiny_job(), {.pp = 2});
}

TEST_CASE("Trainer pp=4 with an uneven partition matches", "[train][dist]") {
  check_run(tiny_job(5), {.pp = 4, .layers = {1, 2, 1, 1}});
}

TEST_CASE("Trainer pp=4 with fewer micro-batches than stages matches", "[train][dist]") {
  auto spec = tiny_job();
  spec.train.global_batch = 4;  // 2 micro-batches in a 4-stage pipeline
  check_run(spec, {.pp = 4});
}

TEST_CASE("Trainer dp=2 (distributed optimizer) matches", "[train][dist]") {
  check_run(tiny_job(), {.dp = 2});
}

TEST_CASE("Trainer dp=2 with many small buckets matches", "[train][dist]") {
  check_run(tiny_job(), {.dp = 2, .bucket_floats = 2000});
}

TEST_CASE("Trainer dp=3 pads buckets that dp does not divide", "[train][dist]") {
  auto spec = tiny_job();
  spec.train.global_batch = 6;
  check_run(spec, {.dp = 3, .bucket_floats = 1500});
}

TEST_CASE("Trainer dp=2 x pp=2 with slow all-gathers: each layer waits for its own parameters", "[train][dist]") {
  // The next forward starts while the all-gathers still run; reading a layer early would
  // train on the previous step's weights of that layer.
  check_run(tiny_job(), Grid{.pp = 2, .dp = 2, .bucket_floats = 3000, .slow_gather_ms = 15});
}

TEST_CASE("Trainer tp=2 x dp=2 matches", "[train][dist]") {
  check_run(tiny_job(), {.tp = 2, .dp = 2, .bucket_floats = 3000});
}

TEST_CASE("Trainer tp=2 x pp=2 x dp=2 matches", "[train][dist]") {
  check_run(tiny_job(), {.tp = 2, .pp = 2, .dp = 2, .bucket_floats = 3000});
}

TEST_CASE("Trainer over Gloo (loopback TCP) tp=2 x pp=2 x dp=2 matches", "[train][dist]") {
  check_run(tiny_job(), {.tp = 2, .pp = 2, .dp = 2, .bucket_floats = 3000, .impl = holmes::comm::test::Impl::kGloo});
}

TEST_CASE("a stop request of one rank reaches every rank in the same step, with no collective of its own",
          "[train][dist]") {
  // The stop flag rides the step's job-wide sums (loss, norm): on tp2 x pp2 x dp2 rank 5
  // alone asks at step 1 and every rank learns it then, once.
  const auto spec = tiny_job();
  const Grid g{.tp = 2, .pp = 2, .dp = 2, .bucket_floats = 3000};
  auto data = DataSet::open(spec);
  holmes::comm::test::Job job(g.impl, g.world());
  std::vector<std::vector<int>> seen(g.world());
  run_threads(g.world(), [&](int rank) {
    const int t = rank % g.tp, d = (rank / g.tp) % g.dp, p = rank / (g.tp * g.dp);
    RankGroups groups = groups_for(job, g, t, d, p);
    auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
    const schedule::RankPlan rp = grid_rank_plan(spec, g, g.rank(t, d, p));
    ParallelGroups pg(rp.place, comms_of(groups), *backend.memory);
    Trainer trainer(spec, rp, backend, *data, &pg);
    for (int64_t s = 0; s < 3; ++s) seen[rank].push_back(trainer.train_step(s, rank == 5 && s == 1).stop_ranks);
  });
  for (const auto& steps : seen) CHECK(steps == std::vector<int>{0, 1, 0});
}

TEST_CASE("pipeline partitions and data-parallel ownership change no bit of the losses or norms", "[train][dist]") {
  // dp = 3 (a ring reduce-scatter sums in an order that depends on each element's owner),
  // small buckets, clipping on most steps: any partition-dependent sum would show.
  auto spec = tiny_job();
  spec.train.global_batch = 12;
  std::vector<std::vector<StepStats>> runs;
  for (std::vector<int> split : {std::vector<int>{3, 1}, {1, 3}, {2, 2}}) {
    const Grid g{.pp = 2, .dp = 3, .layers = split, .bucket_floats = 700};
    runs.push_back(run_grid(spec, g)[g.rank(0, 0, 1)].steps);
  }
  for (size_t k = 1; k < runs.size(); ++k)
    for (size_t i = 0; i < runs[0].size(); ++i) {
      INFO("partition " << k << " step " << i);
      CHECK(runs[k][i].loss == runs[0][i].loss);
      CHECK(runs[k][i].grad_norm == runs[0][i].grad_norm);
    }
}
