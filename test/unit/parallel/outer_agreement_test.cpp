// Agreement::kAtSyncs (step_runner.hpp): diloco replicas sum [loss, stop flags] across the
// replicas only before an outer exchange starts (and where agree() asks), not every step. The
// agreed stats must be those of Agreement::kNow bit for bit, the steps between carry the
// replica's own loss, a stop request must reach every rank at the same (later) step, and a
// non-finite loss of one replica must stop every rank, named, before an outer sync.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test/support/dist_test_util.hpp"

using namespace holmes;
using namespace holmes::test;

namespace {

// Replica `replica` of `replicas`, every other axis of degree 1.
schedule::Place replica_place(int replica, int replicas) {
  schedule::Place place;
  place.at[schedule::Axis::kReplica] = replica;
  place.size[schedule::Axis::kReplica] = replicas;
  return place;
}

// Forwards to a group and remembers on which threads its all-reduces ran.
class ThreadRecordingGroup final : public comm::ProcessGroup {
 public:
  explicit ThreadRecordingGroup(std::unique_ptr<comm::ProcessGroup> inner)
      : ProcessGroup(inner->spec()), inner_(std::move(inner)) {}
  std::string transport() const override { return inner_->transport(); }
  void all_reduce(std::span<float> d, comm::ReduceOp op, const comm::OpOptions& o = {}) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      threads_.push_back(std::this_thread::get_id());
    }
    inner_->all_reduce(d, op, o);
  }
  void reduce_scatter(std::span<float> out, std::span<const float> in, comm::ReduceOp op,
                      const comm::OpOptions& o = {}) override {
    inner_->reduce_scatter(out, in, op, o);
  }
  void all_gather(std::span<float> out, std::span<const float> in, const comm::OpOptions& o = {}) override {
    inner_->all_gather(out, in, o);
  }
  void broadcast(std::span<float> d, int root, const comm::OpOptions& o = {}) override { inner_->broadcast(d, root, o); }
  void send_recv(std::span<const comm::P2POp> ops, const comm::OpOptions& o = {}) override { inner_->send_recv(ops, o); }
  using comm::ProcessGroup::all_to_all_v;
  void all_to_all_v(void* out, std::span<const size_t> out_counts, const void* in, std::span<const size_t> in_counts,
                    comm::DType dtype, const comm::OpOptions& o = {}) override {
    inner_->all_to_all_v(out, out_counts, in, in_counts, dtype, o);
  }
  void barrier(const comm::OpOptions& o = {}) override { inner_->barrier(o); }
  std::vector<std::thread::id> threads() {
    std::lock_guard<std::mutex> lock(mutex_);
    return threads_;
  }

 private:
  std::unique_ptr<comm::ProcessGroup> inner_;
  std::mutex mutex_;
  std::vector<std::thread::id> threads_;
};

// 3 diloco replicas of one rank each (inner_steps 2: outer syncs after steps 2 and 4).
spec::JobSpec diloco_job() {
  spec::JobSpec s = tiny_job(2);
  s.parallel.replicas = 3;
  s.parallel.outer = spec::OuterMode::kDiloco;
  s.parallel.inner_steps = 2;
  s.train.global_batch = 6;
  s.train.steps = 5;
  return s;
}

struct ReplicaRun {
  std::vector<StepStats> steps;  // as train_step returned them (the last one agreed by agree())
  int outer_sums = 0;            // all-reduces over the outer group
  bool params_finite = true;     // after the run (or its failure)
  std::string error;             // what the run threw, if anything
};

// Runs the job on 3 ranks; rank `stopper` asks to stop from step `stop_step` on (-1: never);
// before step `nan_step` (-1: never) rank `nan_rank` writes a NaN into its weights.
std::vector<ReplicaRun> run_replicas(Agreement agreement, int stopper = -1, int stop_step = -1, int nan_rank = -1,
                                     int nan_step = -1) {
  const spec::JobSpec spec = diloco_job();
  auto data = DataSet::open(spec);
  const int n = spec.parallel.replicas;
  comm::test::Job job(comm::test::Impl::kInProcess, n);
  std::vector<ReplicaRun> runs(n);
  run_threads(n, [&](int rank) {
    auto outer = std::make_unique<ThreadRecordingGroup>(job.group(nullptr, "outer", job.all_ranks(), rank));
    ThreadRecordingGroup* recorder = outer.get();
    auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
    const GroupComms comms[] = {{schedule::kOuterGroup, outer.get()}};
    ParallelGroups pg(replica_place(rank, n), comms, *backend.memory);
    Trainer trainer(spec, backend, *data, ParallelContext{.groups = &pg});
    ReplicaRun& r = runs[rank];
    try {
      for (int64_t s = 0; s < spec.train.steps; ++s) {
        if (rank == nan_rank && s == nan_step) {
          trainer.model().params()[0] = std::nanf("");
          trainer.model().params_updated();
        }
        r.steps.push_back(trainer.train_step(s, rank == stopper && s >= stop_step, agreement));
      }
      trainer.agree(r.steps.back());  // the last step: the job's loss, as the training loop asks
    } catch (const std::runtime_error& e) {
      r.error = e.what();
    }
    r.outer_sums = static_cast<int>(recorder->threads().size());
    const float* p = trainer.model().params();
    for (size_t i = 0; i < trainer.model().num_params(); ++i) r.params_finite = r.params_finite && std::isfinite(p[i]);
  });
  return runs;
}

}  // namespace

TEST_CASE("diloco agreement at the outer syncs: the job's stats there, the replica's between", "[train][dist][outer]") {
  const std::vector<ReplicaRun> now = run_replicas(Agreement::kNow), at = run_replicas(Agreement::kAtSyncs);
  for (int r = 0; r < 3; ++r) {
    INFO("replica " << r);
    CHECK(now[r].outer_sums == 5);  // every step
    // Before the exchanges after steps 2 and 4, and agree() after the last: 3 sums, not 5.
    CHECK(at[r].outer_sums == 3);
    REQUIRE(now[r].steps.size() == 5);
    REQUIRE(at[r].steps.size() == 5);
    for (size_t i = 0; i < 5; ++i) {
      INFO("step " << i);
      const StepStats &a = now[r].steps[i], &b = at[r].steps[i];
      const bool agreed = i == 1 || i == 3 || i == 4;
      CHECK(b.agreed == agreed);
      CHECK(b.grad_norm == a.grad_norm);  // the same training, bit for bit
      CHECK(b.stop_ranks == 0);
      if (agreed) {
        CHECK(b.loss == a.loss);  // the same floats summed in the same order
        CHECK(b.replica == -1);
      } else {
        CHECK(b.replica == r);
        CHECK(b.loss != a.loss);  // its own, not the job's
      }
    }
    CHECK(at[r].params_finite);
  }
  // The job's loss is the mean of the replicas' (one data-parallel rank each).
  for (size_t i : {0, 2}) {
    INFO("step " << i);
    CHECK((at[0].steps[i].loss + at[1].steps[i].loss + at[2].steps[i].loss) / 3 ==
          Approx(now[0].steps[i].loss).epsilon(1e-6));
  }
}

TEST_CASE("diloco agreement at the outer syncs: a stop request reaches every replica at the next sync",
          "[train][dist][outer]") {
  // Replica 2 alone asks from step 2 (0-based) on: under kNow every replica's stats of step 2
  // say so; under kAtSyncs only its own until the sum before the exchange after step 4
  // (0-based 3), which every replica's stats say, then the last step's.
  const std::vector<ReplicaRun> now = run_replicas(Agreement::kNow, 2, 2), at = run_replicas(Agreement::kAtSyncs, 2, 2);
  for (int r = 0; r < 3; ++r) {
    INFO("replica " << r);
    std::vector<int> seen_now, seen_at;
    for (const StepStats& s : now[r].steps) seen_now.push_back(s.stop_ranks);
    for (const StepStats& s : at[r].steps) seen_at.push_back(s.agreed ? s.stop_ranks : -1 - s.stop_ranks);
    CHECK(seen_now == std::vector<int>{0, 0, 1, 1, 1});
    // -1 - n: the replica's own count n, not agreed.
    CHECK(seen_at == (r == 2 ? std::vector<int>{-1, 0, -2, 1, 1} : std::vector<int>{-1, 0, -1, 1, 1}));
  }
}

TEST_CASE("diloco agreement at the outer syncs: a replica's non-finite loss stops every rank before the sync",
          "[train][dist][outer]") {
  // Replica 1's weights turn NaN before step 2 (0-based, between the syncs after steps 2 and
  // 4): its loss of step 3 is NaN, its own alone; the sum before the exchange after step 4
  // names it on every rank, and no rank applies that exchange (the others' weights stay
  // finite), and none hangs.
  const std::vector<ReplicaRun> runs = run_replicas(Agreement::kAtSyncs, -1, -1, 1, 2);
  for (int r = 0; r < 3; ++r) {
    INFO("replica " << r << ": " << runs[r].error);
    CHECK_THAT(runs[r].error, Catch::Contains("training loss is not finite on replica 1 at step 3"));
    CHECK_THAT(runs[r].error, Catch::Contains("every replica stops after step 4"));
    CHECK(runs[r].steps.size() == 3);  // steps 1-3 returned; step 4 threw
    CHECK(runs[r].params_finite == (r != 1));
  }
  CHECK(std::isnan(runs[1].steps[2].loss));
  CHECK_FALSE(runs[1].steps[2].agreed);
  CHECK(std::isfinite(runs[0].steps[2].loss));
}

TEST_CASE("diloco agreement at the outer syncs: stats of an earlier step are refused", "[train][dist][outer]") {
  const spec::JobSpec spec = diloco_job();
  auto data = DataSet::open(spec);
  comm::test::Job job(comm::test::Impl::kInProcess, 3);
  std::vector<int> refused(3, 0);
  run_threads(3, [&](int rank) {
    auto outer = job.group(nullptr, "outer", job.all_ranks(), rank);
    auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
    const GroupComms comms[] = {{schedule::kOuterGroup, outer.get()}};
    ParallelGroups pg(replica_place(rank, 3), comms, *backend.memory);
    Trainer trainer(spec, backend, *data, ParallelContext{.groups = &pg});
    StepStats s0 = trainer.train_step(0, false, Agreement::kAtSyncs);
    StepStats s1 = trainer.train_step(1, false, Agreement::kAtSyncs);  // the sync after step 2: agreed
    StepStats s2 = trainer.train_step(2, false, Agreement::kAtSyncs);
    try {
      trainer.agree(s0);
    } catch (const std::logic_error&) {
      refused[rank] = s1.agreed && !s2.agreed ? 1 : 0;
    }
    trainer.agree(s2);
  });
  CHECK(refused == std::vector<int>{1, 1, 1});
}
