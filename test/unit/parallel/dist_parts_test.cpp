// Pieces of the distributed trainer on their own: the model's activation slots and
// grad-ready hook, the bucket plan of the distributed optimizer, owned ranges, and errors
// of a peer that leaves (they must surface as CommError, never as a hang).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <thread>

#include "comm/errors.hpp"
#include "engine/parallel/dist_optimizer.hpp"
#include "model/cpu/host_memory.hpp"
#include "test/support/dist_test_util.hpp"
#include "model/gpt2/gpt2.hpp"

using namespace holmes;
using namespace holmes::data;
using namespace holmes::parallel;
using namespace holmes::test;

namespace {

model::GptConfig small_model() { return model::gpt2::config(3, 32, 4, 97, 16); }

std::vector<int> ids(int n, int V, int salt) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = (i * 31 + salt * 17 + i / 3) % V;
  return v;
}

}  // namespace

TEST_CASE("Gpt keeps the losses in backend memory until take_loss_sum, in forward order, past its log", "[train][dist]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const int B = 1, T = 4, N = B * T;
  model::Gpt gpt(small_model(), backend, B, T);
  gpt.init_weights(5);
  // More forwards than the log holds (1024): the oldest are read early, none is lost.
  std::vector<float> each;
  for (int i = 0; i < 1100; ++i) {
    const auto x = ids(N, 97, 10 + i), y = ids(N, 97, 5000 + i);
    gpt.forward(x.data(), y.data(), B, T);
    each.push_back(gpt.loss());
    if (i == 2) {  // a forward without targets adds nothing
      gpt.forward_stage(x.data(), nullptr, nullptr, B, T);
      CHECK(gpt.loss() == 0.0f);
    }
  }
  double want = 0;
  for (float v : each) want += v;
  CHECK(gpt.take_loss_sum() == want);  // the same sum, bit for bit, as adding them one by one
  CHECK(gpt.take_loss_sum() == 0.0);   // taken
}

TEST_CASE("Gpt slots hold micro-batches in flight: f0 f1 b0 b1 equals f0 b0 f1 b1", "[train][dist]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const int B = 2, T = 8, N = B * T;
  const auto t0 = ids(N, 97, 1), y0 = ids(N, 97, 2), t1 = ids(N, 97, 3), y1 = ids(N, 97, 4);
  model::Gpt one(small_model(), backend, B, T);
  model::Gpt two(small_model(), backend, B, T, nullptr, 2);
  one.init_weights(5);
  two.init_weights(5);
  one.zero_grad();
  two.zero_grad();
  const float l0 = one.forward(t0.data(), y0.data(), B, T);
  one.backward(0.5f);
  const float l1 = one.forward(t1.data(), y1.data(), B, T);
  one.backward(0.5f);
  two.set_slot(0);
  two.forward(t0.data(), y0.data(), B, T);
  two.set_slot(1);
  two.forward(t1.data(), y1.data(), B, T);
  two.set_slot(0);
  CHECK(two.loss() == l0);  // each slot keeps its own loss
  two.backward(0.5f);
  two.set_slot(1);
  CHECK(two.loss() == l1);
  two.backward(0.5f);
  CHECK(std::equal(one.grads(), one.grads() + one.num_params(), two.grads()));
  CHECK_THROWS_AS(two.set_slot(2), std::invalid_argument);
}

TEST_CASE("grad-ready hook reports descending ranges that cover the buffer once", "[train][dist]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const int B = 1, T = 4, N = B * T;
  const auto tok = ids(N, 97, 7), tgt = ids(N, 97, 8);
  for (int first : {0, 1}) {  // whole model; last stage with a tied wte copy
    const auto cfg = small_model().shard(1, 0, first, -1);
    model::Gpt gpt(cfg, backend, B, T);
    gpt.init_weights(3);
    std::vector<std::pair<size_t, size_t>> seen;
    gpt.set_grad_ready_hook([&](size_t b, size_t e) { seen.emplace_back(b, e); });
    std::vector<float> input(static_cast<size_t>(N) * cfg.hidden, 0.1f);
    gpt.forward_stage(tok.data(), input.data(), tgt.data(), B, T);
    gpt.zero_grad();
    gpt.backward();
    INFO("first layer " << first);
    REQUIRE(!seen.empty());
    CHECK(seen.front().second == gpt.num_params());
    CHECK(seen.back().first == 0);
    for (size_t i = 1; i < seen.size(); ++i) CHECK(seen[i].second == seen[i - 1].first);
    CHECK(seen.size() == static_cast<size_t>(cfg.num_stage_layers()) + 1 + (cfg.has_embedding ? 1 : 0));
  }
}

TEST_CASE("buckets are whole tensors of one unit in reverse order, wte alone, owned chunks partition them",
          "[train][dist]") {
  const auto cfg = small_model().shard(2, 1, 1, -1);  // last stage with a tied wte copy
  const model::ParamLayout layout(cfg);
  const size_t target = 3000;
  auto unit_of = [&](size_t offset) {
    for (const auto& t : layout.tensors())
      if (t.offset <= offset && offset < t.offset + t.numel) return norm_unit(t, cfg.layers);
    return -1;
  };
  for (int dp : {1, 2, 3}) {
    std::vector<std::vector<GradBucket>> per_rank;
    for (int r = 0; r < dp; ++r) per_rank.push_back(plan_buckets(layout, target, dp, r));
    const auto& buckets = per_rank[0];
    size_t expect_end = layout.size();
    for (size_t k = 0; k < buckets.size(); ++k) {
      const GradBucket& b = buckets[k];
      CHECK(b.end == expect_end);  // contiguous, from the end of the buffer down
      expect_end = b.begin;
      bool starts = false, ends = false;
      for (const auto& t : layout.tensors()) {
        starts |= t.offset == b.begin;
        ends |= t.offset + t.numel == b.end;
        if (t.name == "wte" && t.offset < b.end && t.offset + t.numel > b.begin) {
          CHECK(b.embedding);
          CHECK((b.begin == t.offset && b.end == t.offset + t.numel));
        }
      }
      CHECK((starts && ends));                           // whole tensors only
      CHECK(unit_of(b.begin) == unit_of(b.end - 1));     // of one block (or wpe, ln_f)
      // Only the first bucket of a unit (its lowest offsets) may be short of the target.
      const bool unit_starts = b.begin == 0 || unit_of(b.begin - 1) != unit_of(b.begin);
      if (!b.embedding && !unit_starts) CHECK(b.end - b.begin >= target);
      size_t covered = 0;
      for (int r = 0; r < dp; ++r) {
        const GradBucket& mine = per_rank[r][k];
        CHECK(mine.chunk * dp >= b.end - b.begin);
        CHECK(mine.chunk * dp < b.end - b.begin + dp);
        CHECK(mine.own_begin == std::min(b.begin + r * mine.chunk, b.end));
        covered += mine.own_end - mine.own_begin;
      }
      CHECK(covered == b.end - b.begin);
    }
    CHECK(expect_end == 0);
  }
}

TEST_CASE("a block's buckets are the same whichever layers share its stage", "[train][dist]") {
  // Block 1 on the first stage [0, 2) (with the embeddings) and on the last stage [1, 3) (with
  // ln_f and the tied copy): same buckets relative to the block, so the same owner and
  // reduce-scatter order for every element.
  const auto model = small_model();
  auto block_buckets = [&](int first, int count) {
    const model::ParamLayout layout(model.shard(1, 0, first, count));
    size_t base = 0;
    for (const auto& t : layout.tensors())
      if (t.layer == 1) {
        base = t.offset;
        break;
      }
    std::vector<std::pair<size_t, size_t>> out;
    for (const GradBucket& b : plan_buckets(layout, 1500, 3, 1))
      for (const auto& t : layout.tensors())
        if (t.layer == 1 && t.offset == b.begin) out.emplace_back(b.begin - base, b.end - base);
    return out;
  };
  const auto a = block_buckets(0, 2), b = block_buckets(1, -1);
  REQUIRE(a.size() > 1);
  CHECK(a == b);
}

TEST_CASE("owned ranges: the whole shard without data parallelism, a partition of it with dp=2", "[train][dist]") {
  const auto spec = tiny_job();
  auto data = DataSet::open(spec);
  for (int dp : {1, 2}) {
    const Grid g{.dp = dp, .bucket_floats = 2500};
    std::vector<std::vector<std::pair<size_t, size_t>>> owned(dp);
    size_t n = 0;
    comm::test::Job job(g.impl, dp);
    run_threads(dp, [&](int d) {
      RankGroups groups = groups_for(job, g, 0, d, 0);
      auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
      ParallelGroups pg(place_of(g, 0, d, 0), comms_of(groups), *backend.memory);
      Trainer trainer(spec, backend, *data, context_of(g, pg, 0, spec.model.layers));
      owned[d] = trainer.shard_state().owned;
      n = trainer.model().num_params();
    });
    if (dp == 1) CHECK(owned[0] == std::vector<std::pair<size_t, size_t>>{{0, n}});
    std::vector<int> hits(n, 0);
    for (const auto& ranges : owned) {
      for (size_t i = 0; i < ranges.size(); ++i) {
        if (i > 0) CHECK(ranges[i - 1].second < ranges[i].first);  // sorted, disjoint, merged
        for (size_t x = ranges[i].first; x < ranges[i].second; ++x) ++hits[x];
      }
    }
    CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
  }
}

TEST_CASE("a peer that leaves makes the others fail with CommError, not hang", "[train][dist]") {
  const auto spec = tiny_job();
  auto data = DataSet::open(spec);
  // tp: model all-reduce; pp: activation send; dp: reduce-scatter on the comm thread.
  const auto gloo = comm::test::Impl::kGloo;
  for (const Grid& g : {Grid{.tp = 2}, Grid{.pp = 2}, Grid{.dp = 2}, Grid{.tp = 2, .impl = gloo},
                        Grid{.pp = 2, .impl = gloo}, Grid{.dp = 2, .impl = gloo}}) {
    comm::test::Job job(g.impl, 2);
    int comm_errors = 0;
    std::mutex m;
    const auto t0 = std::chrono::steady_clock::now();
    run_threads(2, [&](int rank) {
      const int t = rank % g.tp, d = (rank / g.tp) % g.dp, p = rank / (g.tp * g.dp);
      RankGroups groups = groups_for(job, g, t, d, p, std::chrono::seconds(20));
      auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
      ParallelGroups pg(place_of(g, t, d, p), comms_of(groups), *backend.memory);
      Trainer trainer(spec, backend, *data, context_of(g, pg, p, spec.model.layers));
      if (rank == 1) return;  // leaves: its groups go away
      try {
        trainer.train_step(0);
      } catch (const comm::CommError&) {
        std::lock_guard<std::mutex> lock(m);
        ++comm_errors;
      }
    });
    INFO("grid tp=" << g.tp << " pp=" << g.pp << " dp=" << g.dp << " " << comm::test::impl_name(g.impl));
    CHECK(comm_errors == 1);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(15));  // well before the time-out
  }
}

TEST_CASE("CommClock: queued communication is timed by the device, blocking calls by the host", "[train][dist]") {
  // Device memory (stand-in: every span of two timed fences lasts kSpanMs): the op returns at
  // once and its time comes with settle().
  holmes::test::HostAsDevice dev;
  CommClock clock;
  int ran = 0;
  clock.time_queued(dev, dev.stream(), [&] { ++ran; });
  clock.time_queued(dev, dev.stream(), [&] { ++ran; });
  CHECK(ran == 2);
  CHECK(clock.ms() == 0);
  CHECK(clock.settle() == 2 * holmes::test::HostAsDevice::kSpanMs);
  CHECK(clock.ms() == 2 * holmes::test::HostAsDevice::kSpanMs);
  CHECK(clock.settle() == 0);  // each span once
  // Host memory keeps no device time: the same call is timed on the host.
  auto host = holmes::model::cpu::make_host_memory();
  clock.reset();
  clock.time_queued(*host, host->stream(), [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  CHECK(clock.ms() >= 19);
  CHECK(clock.settle() == 0);
}
