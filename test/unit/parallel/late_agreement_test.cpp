// Agreement::kLate (step_runner.hpp): diloco replicas sum each step's [loss, stop flags]
// across the replicas beside the next step. The agreed stats must be those of Agreement::kNow
// bit for bit, a stop request must reach every rank at the same (later) step, and the sum must
// really run on the outer group's communication thread, not in the step.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "test/support/dist_test_util.hpp"

using namespace holmes;
using namespace holmes::test;

namespace {

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
  std::vector<StepStats> steps;  // agreed, in step order
  bool returned_unagreed = true;  // every kLate train_step returned agreed false
  bool outer_sums_beside = true;  // the outer group's all-reduces ran off the rank's own thread
  int outer_sums = 0;
};

// Runs the job on 3 ranks; rank `stopper` asks to stop in step `stop_step` (-1: never).
std::vector<ReplicaRun> run_replicas(Agreement agreement, int stopper = -1, int stop_step = -1) {
  const spec::JobSpec spec = diloco_job();
  auto data = DataSet::open(spec);
  const int n = spec.parallel.replicas;
  comm::test::Job job(comm::test::Impl::kInProcess, n);
  std::vector<ReplicaRun> runs(n);
  run_threads(n, [&](int rank) {
    auto outer = std::make_unique<ThreadRecordingGroup>(job.group(nullptr, "outer", job.all_ranks(), rank));
    ThreadRecordingGroup* recorder = outer.get();
    auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
    ParallelGroups::Comms comms;
    comms.outer = outer.get();
    ParallelGroups pg(Coords{.replica = rank, .replicas = n}, comms, {}, *backend.memory);
    Trainer trainer(spec, backend, *data, ParallelContext{.groups = &pg});
    ReplicaRun& r = runs[rank];
    std::optional<StepStats> held;
    for (int64_t s = 0; s < spec.train.steps; ++s) {
      StepStats st = trainer.train_step(s, rank == stopper && s == stop_step, agreement);
      if (agreement == Agreement::kLate) r.returned_unagreed = r.returned_unagreed && !st.agreed;
      if (held) {
        trainer.agree(*held);  // landed in this step
        r.steps.push_back(*held);
      }
      held = st;
    }
    trainer.agree(*held);  // the last one is still in flight: wait for it
    r.steps.push_back(*held);
    // One sum per step (and none other: evaluate() is not called), each on the rank's own
    // thread (kNow) or beside it (kLate).
    const std::vector<std::thread::id> threads = recorder->threads();
    r.outer_sums = static_cast<int>(threads.size());
    for (const auto& id : threads) r.outer_sums_beside = r.outer_sums_beside && id != std::this_thread::get_id();
  });
  return runs;
}

}  // namespace

TEST_CASE("diloco late agreement: the same stats as at once, the sum beside the step", "[train][dist][outer]") {
  const std::vector<ReplicaRun> now = run_replicas(Agreement::kNow), late = run_replicas(Agreement::kLate);
  for (int r = 0; r < 3; ++r) {
    INFO("replica " << r);
    CHECK(late[r].returned_unagreed);
    CHECK(now[r].outer_sums == 5);
    CHECK(late[r].outer_sums == 5);
    CHECK_FALSE(now[r].outer_sums_beside);
    CHECK(late[r].outer_sums_beside);
    REQUIRE(now[r].steps.size() == 5);
    REQUIRE(late[r].steps.size() == 5);
    for (size_t i = 0; i < 5; ++i) {
      INFO("step " << i);
      const StepStats &a = now[r].steps[i], &b = late[r].steps[i];
      CHECK(b.agreed);
      CHECK(b.step == static_cast<int64_t>(i));
      CHECK(b.loss == a.loss);  // bit for bit: the same floats summed in the same order
      CHECK(b.grad_norm == a.grad_norm);
      CHECK(b.stop_ranks == 0);
      CHECK(b.loss == late[0].steps[i].loss);  // the job's loss, the same on every replica
    }
  }
  // The replicas train apart between syncs: their norms differ (the loss is the job's).
  CHECK(late[0].steps[1].grad_norm != late[1].steps[1].grad_norm);
}

TEST_CASE("diloco late agreement: a stop request reaches every replica in the stats of its step", "[train][dist][outer]") {
  // Replica 2 alone asks in step 1: every replica's agreed stats of step 1 say so, and no
  // other step's; the loop learns it when step 2 has landed the sum (run.cpp).
  for (Agreement a : {Agreement::kNow, Agreement::kLate}) {
    const std::vector<ReplicaRun> runs = run_replicas(a, 2, 1);
    for (const ReplicaRun& r : runs) {
      std::vector<int> seen;
      for (const StepStats& s : r.steps) seen.push_back(s.stop_ranks);
      CHECK(seen == std::vector<int>{0, 1, 0, 0, 0});
    }
  }
}

TEST_CASE("diloco late agreement: stats of a step whose sums are gone are refused", "[train][dist][outer]") {
  const spec::JobSpec spec = diloco_job();
  auto data = DataSet::open(spec);
  comm::test::Job job(comm::test::Impl::kInProcess, 3);
  std::vector<int> refused(3, 0), unagreed_after(3, 0);
  run_threads(3, [&](int rank) {
    auto outer = job.group(nullptr, "outer", job.all_ranks(), rank);
    auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
    ParallelGroups::Comms comms;
    comms.outer = outer.get();
    ParallelGroups pg(Coords{.replica = rank, .replicas = 3}, comms, {}, *backend.memory);
    Trainer trainer(spec, backend, *data, ParallelContext{.groups = &pg});
    StepStats s0 = trainer.train_step(0, false, Agreement::kLate);
    trainer.train_step(1, false, Agreement::kLate);
    StepStats s2 = trainer.train_step(2, false, Agreement::kLate);  // step 0's sums were replaced by step 1's
    try {
      trainer.agree(s0);
    } catch (const std::logic_error&) {
      refused[rank] = 1;
    }
    unagreed_after[rank] = s2.agreed ? 0 : 1;
    trainer.agree(s2);  // drains step 2's sum: nothing left in flight on any rank
  });
  CHECK(refused == std::vector<int>{1, 1, 1});
  CHECK(unagreed_after == std::vector<int>{1, 1, 1});
}
