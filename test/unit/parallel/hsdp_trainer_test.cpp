// Elastic sync replicas (HSDP, docs/elastic.md): each replica shards its optimizer over its own
// data-parallel group and every step the owned gradient shards are averaged over the outer
// group (DistOptimizer::average_over_replicas). The replicas must stay identical bit for bit
// (weights and the AdamW moments of each coordinate) and train as one data-parallel group of
// every replica's ranks does (the same global batch split the same way), up to the order of
// the sums.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "test/support/dist_test_util.hpp"

using namespace holmes;
using namespace holmes::test;

namespace {

struct HsdpRun {
  std::vector<double> losses, norms;
  std::vector<float> start, params, m, v;  // start: the weights before the first step
  int replica = 0, dp = 0;
};

// Runs `spec` on the ranks of its plan with tp = pp = 1 and `dp` data-parallel ranks per
// replica, each group of the plan an in-process group.
std::vector<HsdpRun> run_plan(const spec::JobSpec& spec, int dp) {
  const plan::Plan p = test_plan(spec, 1, 1, dp);
  auto data = DataSet::open(spec);
  comm::test::Job job(comm::test::Impl::kInProcess, p.world);
  std::vector<HsdpRun> runs(p.world);
  run_threads(p.world, [&](int rank) {
    const schedule::RankPlan rp = plan::rank_plan(p, rank);
    std::vector<std::unique_ptr<comm::ProcessGroup>> owned;
    std::vector<GroupComms> comms;
    for (const plan::Group& g : p.groups) {
      const bool axis = g.kind == schedule::kDpGroup || g.kind == schedule::kOuterGroup;
      if (!axis || g.ranks.size() < 2 || std::find(g.ranks.begin(), g.ranks.end(), rank) == g.ranks.end()) continue;
      owned.push_back(job.group(nullptr, fmt::format("{}{}", schedule::to_string(g.kind), g.index), g.ranks, rank));
      comms.push_back({g.kind, owned.back().get()});
    }
    auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
    ParallelGroups pg(rp.place, comms, *backend.memory);
    Trainer trainer(spec, rp, backend, *data, &pg);
    HsdpRun& r = runs[rank];
    r.start.assign(trainer.model().params(), trainer.model().params() + trainer.model().num_params());
    for (int64_t s = 0; s < spec.train.steps; ++s) {
      const StepStats stats = trainer.train_step(s, false, Agreement::kAtSyncs);
      REQUIRE(stats.agreed);  // elastic sync replicas agree every step
      r.losses.push_back(stats.loss);
      r.norms.push_back(stats.grad_norm);
    }
    const checkpoint::ShardState st = trainer.shard_state();  // host memory on the CPU backend
    r.params.assign(st.params, st.params + trainer.model().num_params());
    r.m.assign(st.exp_avg, st.exp_avg + st.owned_size());
    r.v.assign(st.exp_avg_sq, st.exp_avg_sq + st.owned_size());
    r.replica = rp.place[schedule::Axis::kReplica];
    r.dp = rp.place.data_rank();
  });
  return runs;
}

// ||(a - start) - (b - start)|| / ||b - start||: how far one run's training moved the weights
// from where the other's moved them.
double update_gap(const HsdpRun& a, const HsdpRun& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.params.size(); ++i) {
    const double ua = double(a.params[i]) - a.start[i], ub = double(b.params[i]) - b.start[i];
    diff += (ua - ub) * (ua - ub);
    norm += ub * ub;
  }
  return std::sqrt(diff / norm);
}

}  // namespace

TEST_CASE("elastic sync replicas stay identical and train as one data-parallel group", "[train][dist][hsdp]") {
  spec::JobSpec spec = tiny_job(2);
  spec.parallel.replicas = 2;
  spec.parallel.outer = spec::OuterMode::kSync;
  spec.parallel.elastic = true;
  spec.train.global_batch = 8;
  spec.train.steps = 4;
  const std::vector<HsdpRun> hsdp = run_plan(spec, 2);  // 2 replicas x data 2
  REQUIRE(hsdp.size() == 4);
  // Replica 1's rank at each data coordinate holds replica 0's state, bit for bit.
  std::map<int, const HsdpRun*> first;  // by data coordinate inside the replica
  for (const HsdpRun& r : hsdp)
    if (r.replica == 0) first[r.dp] = &r;
  for (const HsdpRun& r : hsdp) {
    INFO("replica " << r.replica << ", data rank " << r.dp);
    const HsdpRun& peer = *first.at(r.dp % 2);
    CHECK(r.params == peer.params);
    CHECK(r.m == peer.m);
    CHECK(r.v == peer.v);
    CHECK(r.losses == hsdp[0].losses);
    CHECK(r.norms == hsdp[0].norms);
  }
  // Against one data-parallel group of four (the same data ranks read the same sequences).
  spec.parallel.elastic = false;
  const std::vector<HsdpRun> plain = run_plan(spec, 2);  // sync: data 2 x 2 replicas = 4
  REQUIRE(plain.size() == 4);
  for (size_t s = 0; s < plain[0].losses.size(); ++s) {
    CHECK(hsdp[0].losses[s] == Approx(plain[0].losses[s]).epsilon(1e-6));
    CHECK(hsdp[0].norms[s] == Approx(plain[0].norms[s]).epsilon(1e-5));
  }
  REQUIRE(hsdp[0].start == plain[0].start);
  // AdamW's step is about lr x sign(g) where |g| is small, so a rounding can flip a tiny
  // gradient's element: compare the whole update, not element by element.
  const double gap = update_gap(hsdp[0], plain[0]);
  INFO("update gap " << gap);
  CHECK(gap < 1e-4);
  // The moments a rank owns differ in extent (1/2 of each bucket here, 1/4 there): the first
  // quarter of every bucket is data rank 0's in both; compare the whole model's weights above
  // and the moments' sums of squares here.
  double mh = 0, mp = 0;
  for (const HsdpRun& r : hsdp)
    if (r.replica == 0)
      for (float x : r.v) mh += double(x) * x;
  for (const HsdpRun& r : plain)
    for (float x : r.v) mp += double(x) * x;
  CHECK(mh == Approx(mp).epsilon(1e-4));
}
