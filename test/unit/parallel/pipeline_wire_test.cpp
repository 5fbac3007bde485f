// What a tensor-parallel pipeline puts on the wire between its stages: each tp rank sends its
// 1/t slice of the boundary tensor across the hop and the receiving stage all-gathers the
// slices inside its node (Megatron-LM's scatter/gather). The bytes the groups carry are the
// bytes the plan prices per link class, and the tensor is the same: the run matches the
// single-process trainer as every distributed run does.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>

#include "engine/plan/plan.hpp"
#include "test/support/cluster_gen.hpp"
#include "test/support/dist_test_util.hpp"

using namespace holmes::test;
namespace hp = holmes::plan;

namespace {

// A host group that counts the bytes this member sends: a send's floats, and for an
// all-reduce what a ring sends, 2 (n - 1) / n of the buffer.
class CountingGroup final : public holmes::comm::ProcessGroup {
 public:
  explicit CountingGroup(std::unique_ptr<holmes::comm::ProcessGroup> inner)
      : ProcessGroup(inner->spec()), inner_(std::move(inner)) {}
  std::string transport() const override { return inner_->transport(); }
  void all_reduce(std::span<float> d, holmes::comm::ReduceOp op, const holmes::comm::OpOptions& o = {}) override {
    const double n = size();
    reduced_ += 2 * (n - 1) / n * double(d.size_bytes());
    inner_->all_reduce(d, op, o);
  }
  void reduce_scatter(std::span<float> out, std::span<const float> in, holmes::comm::ReduceOp op,
                      const holmes::comm::OpOptions& o = {}) override {
    inner_->reduce_scatter(out, in, op, o);
  }
  void all_gather(std::span<float> out, std::span<const float> in, const holmes::comm::OpOptions& o = {}) override {
    inner_->all_gather(out, in, o);
  }
  void broadcast(std::span<float> d, int root, const holmes::comm::OpOptions& o = {}) override {
    inner_->broadcast(d, root, o);
  }
  void all_to_all_v(void* out, std::span<const size_t> out_counts, const void* in, std::span<const size_t> in_counts,
                    holmes::DType dtype, const holmes::comm::OpOptions& o = {}) override {
    inner_->all_to_all_v(out, out_counts, in, in_counts, dtype, o);
  }
  void send_recv(std::span<const holmes::comm::P2POp> ops, const holmes::comm::OpOptions& o = {}) override {
    for (const auto& op : ops)
      if (op.kind == holmes::comm::P2POp::kSend) sent_ += double(op.data.size_bytes());
    inner_->send_recv(ops, o);
  }
  void barrier(const holmes::comm::OpOptions& o = {}) override { inner_->barrier(o); }
  double sent() const { return sent_; }
  double reduced() const { return reduced_; }

 private:
  std::unique_ptr<holmes::comm::ProcessGroup> inner_;
  std::atomic<double> sent_ = 0, reduced_ = 0;
};

}  // namespace

TEST_CASE("a tensor-parallel pipeline puts on the wire the bytes its plan prices per link class", "[train][dist][wire]") {
  auto spec = tiny_job(4);
  spec.parallel.tensor = 2;
  spec.parallel.pipeline = 2;
  spec.parallel.data = 1;
  spec.train.steps = 3;
  const Grid g{.tp = 2, .pp = 2, .dp = 1};
  // Two CPU nodes of two workers on Ethernet: tensor parallelism inside each, the pipeline's hop
  // and the tied embedding's sum across, on the Ethernet.
  auto topo = hp::testing::make_cluster({{holmes::topo::NicKind::kEthernet, 2, 2, 0, 1, 0.05}});
  for (auto& n : topo.nodes) n.devices.kind = "cpu", n.devices.cores = 2;
  const hp::Plan plan = hp::make_plan(spec, topo);
  REQUIRE(plan.tp == 2);
  REQUIRE(plan.pp == 2);
  const double priced = plan.estimate.bytes_per_step[static_cast<int>(hp::LinkKind::kEthernet)];
  REQUIRE(priced > 0);
  CHECK(plan.estimate.bytes_per_step[static_cast<int>(hp::LinkKind::kIntraNode)] > 0);  // the tp sums

  const Reference ref = run_reference(spec);
  auto data = DataSet::open(spec);
  holmes::comm::test::Job job(g.impl, g.world());
  std::vector<double> pipeline(g.world()), tied(g.world());
  std::vector<std::vector<float>> losses(g.world());
  run_threads(g.world(), [&](int rank) {
    const int t = rank % g.tp, d = 0, p = rank / g.tp;
    RankGroups groups = groups_for(job, g, t, d, p);
    auto pp = std::make_unique<CountingGroup>(std::move(groups.pp));
    CountingGroup* pp_count = pp.get();
    groups.pp = std::move(pp);
    CountingGroup* emb_count = nullptr;
    if (groups.embedding) {
      auto emb = std::make_unique<CountingGroup>(std::move(groups.embedding));
      emb_count = emb.get();
      groups.embedding = std::move(emb);
    }
    auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
    // The plan priced above is the one the ranks run (the trainer refuses groups that disagree).
    const holmes::schedule::RankPlan rp = hp::rank_plan(plan, rank);
    ParallelGroups pg(rp.place, comms_of(groups), *backend.memory);
    Trainer trainer(spec, rp, backend, *data, &pg);
    for (int64_t s = 0; s < spec.train.steps; ++s) losses[rank].push_back(trainer.train_step(s).loss);
    // Per step: the pipeline's sends (its job-wide sums of a few floats are not pipeline traffic:
    // all-reduces, left out) and the tied embedding's sum.
    pipeline[rank] = pp_count->sent() / spec.train.steps;
    tied[rank] = emb_count ? emb_count->reduced() / spec.train.steps : 0.0;
  });
  // Each rank sends a quarter of the (B,T,C) fp32 boundary a micro-batch: its half of the tensor
  // (tp 2), and only one way.
  const double slice = double(spec.train.micro_batch) * spec.train.seq_len * spec.model.hidden * 4 / 2;
  const int m = plan.micro_batches;
  for (int r = 0; r < g.world(); ++r) CHECK(pipeline[r] == Approx(m * slice));
  double sent = 0;
  for (int r = 0; r < g.world(); ++r) sent += pipeline[r] + tied[r];
  CHECK(sent == Approx(priced));
  // The same numbers as one process computes: only the transport changed.
  for (int r = 0; r < g.world(); ++r)
    for (int64_t s = 0; s < spec.train.steps; ++s) {
      CHECK(losses[r][s] == losses[0][s]);
      CHECK(std::abs(losses[r][s] - ref.steps[s].loss) <= 1e-5 * std::abs(ref.steps[s].loss));
    }
}
