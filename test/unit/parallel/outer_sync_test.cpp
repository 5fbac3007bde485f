// OuterSync (outer_sync.hpp): the payload codecs, the staggered fragment schedule, and one
// outer step of 3 replicas x 2 data-parallel ranks against the formulas written out here.
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "engine/parallel/outer_sync.hpp"
#include "engine/schedule/outer_payload.hpp"
#include "model/cpu/host_memory.hpp"
#include "test/support/dist_test_util.hpp"

using namespace holmes;
using namespace holmes::parallel;
using holmes::spec::OuterDtype;

namespace {

std::vector<float> random_values(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<float> round_trip(OuterDtype dtype, const std::vector<float>& x) {
  std::vector<std::byte> wire(schedule::outer_payload_size(dtype, x.size()));
  outer_encode(dtype, x.data(), x.size(), wire.data());
  std::vector<float> out(x.size(), 0.0f);
  outer_decode_add(dtype, wire.data(), x.size(), out.data());
  return out;
}

// Rank `rank` of `replicas` x `dp` ranks (rank = replica x dp + d) of an in-process job: its
// outer group (data-parallel rank d in every replica, group rank = replica), a second group of
// the same members (the overlapped exchange's) and its replica's data-parallel group.
struct ReplicaRank {
  ReplicaRank(comm::test::Job& job, int rank, int replicas, int dp) {
    const int r = rank / dp, d = rank % dp;
    std::vector<int> outer_members, dp_members;
    for (int i = 0; i < replicas; ++i) outer_members.push_back(i * dp + d);
    for (int i = 0; i < dp; ++i) dp_members.push_back(r * dp + i);
    outer_pg = job.group(nullptr, "outer" + std::to_string(d), outer_members, rank);
    side_pg = job.group(nullptr, "side" + std::to_string(d), outer_members, rank);
    dp_pg = job.group(nullptr, "dp" + std::to_string(r), dp_members, rank);
    outer.emplace(*outer_pg, nullptr, *mem, clock, Group::Options{});
    side.emplace(*side_pg, nullptr, *mem, clock, Group::Options{});
    data.emplace(*dp_pg, nullptr, *mem, clock, Group::Options{});
  }
  std::unique_ptr<comm::ProcessGroup> outer_pg, side_pg, dp_pg;
  std::unique_ptr<device::DeviceMemory> mem = model::cpu::make_host_memory();
  CommClock clock;
  std::optional<Group> outer, side, data;
};

}  // namespace

TEST_CASE("outer payload: fp32 exact, bf16 and int8 within their rounding, sizes as the planner prices", "[outer]") {
  for (size_t n : {size_t{1}, size_t{255}, size_t{256}, size_t{1000}, size_t{4099}}) {
    const auto x = random_values(n, static_cast<uint32_t>(n), 1e-3f);
    for (OuterDtype d : {OuterDtype::kFp32, OuterDtype::kBf16, OuterDtype::kInt8}) {
      const size_t bytes = schedule::outer_payload_size(d, n);
      CHECK(bytes % 4 == 0);
      CHECK(bytes >= schedule::outer_payload_bytes(d, static_cast<double>(n)));
      CHECK(bytes < schedule::outer_payload_bytes(d, static_cast<double>(n)) + 4);
    }
    CHECK(round_trip(OuterDtype::kFp32, x) == x);
    const auto b = round_trip(OuterDtype::kBf16, x);
    for (size_t i = 0; i < n; ++i) CHECK(std::fabs(b[i] - x[i]) <= std::fabs(x[i]) * 0x1p-8f);
    const auto q = round_trip(OuterDtype::kInt8, x);
    for (size_t c = 0; c < n; c += schedule::kOuterChunk) {
      float amax = 0;
      for (size_t i = c; i < std::min(n, c + schedule::kOuterChunk); ++i) amax = std::max(amax, std::fabs(x[i]));
      for (size_t i = c; i < std::min(n, c + schedule::kOuterChunk); ++i)
        CHECK(std::fabs(q[i] - x[i]) <= amax / 127 * 0.5001f);
    }
    CHECK(round_trip(OuterDtype::kInt8, x) == q);  // deterministic
  }
  // bf16 rounds to nearest even: 1 + 2^-8 is a tie between 1 and 1 + 2^-7.
  CHECK(round_trip(OuterDtype::kBf16, {1.0f + 0x1p-8f}) == std::vector<float>{1.0f});
  CHECK(round_trip(OuterDtype::kBf16, {1.0f + 3 * 0x1p-8f}) == std::vector<float>{1.0f + 0x1p-6f});
  // A chunk of zeros has scale 0 and decodes to zeros.
  CHECK(round_trip(OuterDtype::kInt8, std::vector<float>(300, 0.0f)) == std::vector<float>(300, 0.0f));
}

TEST_CASE("outer schedule: each fragment once every H steps, fragments staggered", "[outer]") {
  Group one;
  auto count = [&](int H, int F) {
    OuterSync s(OuterConfig{H, F, 0.7, 0.9, OuterDtype::kFp32}, one, one, 100);
    std::vector<std::vector<int64_t>> at(F);
    for (int64_t done = 1; done <= 4 * H; ++done)
      for (int f : s.due(done)) at[f].push_back(done);
    return at;
  };
  CHECK(count(4, 1) == std::vector<std::vector<int64_t>>{{4, 8, 12, 16}});
  CHECK(count(4, 2) == std::vector<std::vector<int64_t>>{{2, 6, 10, 14}, {4, 8, 12, 16}});
  const auto five = count(20, 5);
  for (int f = 0; f < 5; ++f) {
    REQUIRE(five[f].size() == 4);
    CHECK(five[f][0] == 4 * (f + 1));
    for (size_t i = 1; i < 4; ++i) CHECK(five[f][i] - five[f][i - 1] == 20);
  }
  OuterSync s(OuterConfig{4, 3, 0.7, 0.9, OuterDtype::kFp32}, one, one, 100);
  CHECK(s.fragment(0) == std::pair<size_t, size_t>{0, 33});
  CHECK(s.fragment(2) == std::pair<size_t, size_t>{66, 100});
  CHECK(s.state_floats() == 3 * 100 + 100);  // anchor, momentum, residual; owner residual (one member owns all)
}

// Independent of the codec: symmetric int8 per kOuterChunk values, as the formula says.
std::vector<float> int8_rounded(const float* x, size_t n) {
  std::vector<float> out(n);
  for (size_t b = 0; b < n; b += schedule::kOuterChunk) {
    const size_t e = std::min(n, b + schedule::kOuterChunk);
    float amax = 0;
    for (size_t i = b; i < e; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float scale = amax / 127.0f;
    for (size_t i = b; i < e; ++i) out[i] = scale > 0 ? scale * static_cast<float>(std::round(x[i] / scale)) : 0;
  }
  return out;
}

TEST_CASE("outer step: 3 replicas x 2 data-parallel ranks take the Nesterov step on the mean change", "[outer]") {
  constexpr int kReplicas = 3, kDp = 2;
  constexpr size_t kSize = 1601;  // odd: the last data-parallel slice is shorter
  const double lr = 0.7, mu = 0.9;
  const auto start = random_values(kSize, 7, 1.0f);
  // Replica r's weights after each round of inner steps: start + step_1(r) + ... + step_k(r).
  constexpr int kRounds = 3;
  std::vector<std::vector<float>> steps[kRounds];
  for (int k = 0; k < kRounds; ++k)
    for (int r = 0; r < kReplicas; ++r) steps[k].push_back(random_values(kSize, 100 * (k + 1) + r, 0.01f));
  for (OuterDtype dtype : {OuterDtype::kFp32, OuterDtype::kInt8}) {
    DYNAMIC_SECTION(to_string(dtype)) {
      comm::test::Job job(comm::test::Impl::kInProcess, kReplicas * kDp);
      std::vector<std::vector<float>> after(kReplicas * kDp);
      std::vector<double> sent(kReplicas * kDp);
      test::run_threads(kReplicas * kDp, [&](int rank) {
        const int r = rank / kDp;
        ReplicaRank g(job, rank, kReplicas, kDp);
        OuterSync sync(OuterConfig{2, 1, lr, mu, dtype}, *g.outer, *g.data, kSize);
        std::vector<float> p = start;
        sync.reset(p.data());
        CHECK(sync.after_step(1, p.data()) == 0);  // not due
        for (int k = 0; k < kRounds; ++k) {
          for (size_t i = 0; i < kSize; ++i) p[i] += steps[k][r][i];
          CHECK(sync.after_step(2 * (k + 1), p.data()) == 1);
        }
        after[rank] = p;
        sent[rank] = sync.bytes_sent();
      });
      // Every rank of every replica holds the same weights afterwards.
      for (int rank = 1; rank < kReplicas * kDp; ++rank) CHECK(after[rank] == after[0]);
      // Bytes: 2 (N - 1) part payloads a sync, as the planner prices (within the 4-byte words).
      const size_t slice = (kSize + kDp - 1) / kDp, part = (slice + kReplicas - 1) / kReplicas;
      for (double b : sent) CHECK(b == kRounds * 2.0 * (kReplicas - 1) * schedule::outer_payload_size(dtype, part));
      const double priced = schedule::outer_exchange_bytes(dtype, static_cast<double>(slice), kReplicas);
      CHECK(sent[0] / kRounds >= priced);
      CHECK(sent[0] / kRounds < priced + 2 * (kReplicas - 1) * 4);
      // The reference, written from the formulas. Per slice of a data-parallel rank, padded to
      // `slice` and cut in kReplicas parts of `part`: each replica rounds its change part by
      // part (with its error feedback), the owner sums the rounded parts in replica order,
      // / N, adds its own error feedback and rounds once more; Nesterov on what that gives.
      const bool q = dtype == OuterDtype::kInt8;
      const size_t padded = part * kReplicas;
      // In float, as the runtime keeps its state, so the roundings fall alike.
      std::vector<float> anchor = start, m(kSize, 0.0f);
      const float flr = static_cast<float>(lr), fmu = static_cast<float>(mu);
      std::vector<std::vector<float>> weights(kReplicas, start);
      std::vector<std::vector<float>> residual(kReplicas, std::vector<float>(kDp * padded, 0.0f));
      std::vector<float> owner_residual(kDp * padded, 0.0f);
      for (int k = 0; k < kRounds; ++k) {
        std::vector<float> g(kSize, 0.0f);
        for (int dd = 0; dd < kDp; ++dd) {
          const size_t b = dd * slice, len = std::min(kSize, b + slice) - b;
          std::vector<float> sum(padded, 0.0f);
          for (int r = 0; r < kReplicas; ++r) {
            for (size_t i = 0; i < len; ++i) weights[r][b + i] += steps[k][r][b + i];
            std::vector<float> delta(padded, 0.0f);
            for (size_t i = 0; i < len; ++i)
              delta[i] = anchor[b + i] - weights[r][b + i] + residual[r][dd * padded + i];
            for (size_t o = 0; o < padded; o += part) {
              const std::vector<float> sent_part = q ? int8_rounded(delta.data() + o, part)
                                                     : std::vector<float>(delta.begin() + o, delta.begin() + o + part);
              for (size_t i = 0; i < part; ++i) {
                sum[o + i] += sent_part[i];
                residual[r][dd * padded + o + i] = delta[o + i] - sent_part[i];
              }
            }
          }
          for (size_t o = 0; o < padded; o += part) {
            std::vector<float> avg(part);
            for (size_t i = 0; i < part; ++i)
              avg[i] = sum[o + i] * (1.0f / kReplicas) + owner_residual[dd * padded + o + i];
            const std::vector<float> got = q ? int8_rounded(avg.data(), part) : avg;
            for (size_t i = 0; i < part; ++i) {
              owner_residual[dd * padded + o + i] = avg[i] - got[i];
              if (o + i < len) g[b + o + i] = got[i];
            }
          }
        }
        for (size_t i = 0; i < kSize; ++i) {
          m[i] = fmu * m[i] + g[i];
          anchor[i] -= flr * (g[i] + fmu * m[i]);
        }
        for (int r = 0; r < kReplicas; ++r) weights[r] = anchor;
      }
      // One int8 step is ~2e-4 here: a margin far below it tells a missed rounding.
      for (size_t i = 0; i < kSize; ++i) CHECK(after[0][i] == Approx(anchor[i]).margin(1e-6));
    }
  }
}

TEST_CASE("outer overlap: the exchange lands tau steps later on the new anchor plus each replica's progress",
          "[outer]") {
  constexpr int kReplicas = 3, kDp = 2, kH = 3, kTau = 2, kSteps = 11;  // sent after 3, 6, 9; applied after 5, 8, 11
  constexpr size_t kSize = 701;
  const float lr = 0.7f, mu = 0.9f;
  const auto start = random_values(kSize, 9, 1.0f);
  std::vector<std::vector<float>> steps[kSteps];
  for (int t = 0; t < kSteps; ++t)
    for (int r = 0; r < kReplicas; ++r) steps[t].push_back(random_values(kSize, 1000 * (t + 1) + r, 0.01f));
  // resume_after > 0: the rank's OuterSync is saved after that step (an exchange in flight,
  // landed first) and a new one loads the state and goes on, as a resume does.
  auto run = [&](int resume_after) {
    comm::test::Job job(comm::test::Impl::kInProcess, kReplicas * kDp);
    std::vector<std::vector<float>> after(kReplicas * kDp), anchors(kReplicas * kDp);
    std::vector<int> busy_wrong(kReplicas * kDp, 0);  // a step whose busy() was wrong (Catch2 asserts on one thread)
    test::run_threads(kReplicas * kDp, [&](int rank) {
      const int r = rank / kDp;
      ReplicaRank g(job, rank, kReplicas, kDp);
      const OuterConfig config{kH, 1, lr, mu, OuterDtype::kFp32, kTau};
      auto sync = std::make_unique<OuterSync>(config, *g.outer, *g.data, kSize, &*g.side);
      std::vector<float> p = start;
      sync->reset(p.data());
      for (int t = 1; t <= kSteps; ++t) {
        for (size_t i = 0; i < kSize; ++i) p[i] += steps[t - 1][r][i];
        if (sync->busy(t) != (t % kH == 0 || (t > kH && t % kH == kTau))) busy_wrong[rank] = t;
        sync->after_step(t, p.data());
        if (t == resume_after) {
          sync->land();
          const std::vector<float> saved = sync->state();
          sync = std::make_unique<OuterSync>(config, *g.outer, *g.data, kSize, &*g.side);
          sync->load(saved);
        }
      }
      after[rank] = p;
      sync->land();
      const std::vector<float> st = sync->state();
      anchors[rank].assign(st.begin(), st.begin() + static_cast<std::ptrdiff_t>(sync->slice(0).second - sync->slice(0).first));
    });
    CHECK(busy_wrong == std::vector<int>(kReplicas * kDp, 0));
    return std::pair{after, anchors};
  };
  const auto [after, anchors] = run(0);
  // The anchors (shared outer weights) agree bit for bit across replicas; each replica's ranks agree.
  for (int rank = 0; rank < kReplicas * kDp; ++rank) {
    CHECK(anchors[rank] == anchors[rank % kDp]);
    CHECK(after[rank] == after[rank / kDp * kDp]);
  }
  // The reference, from the formulas (fp32: one part per owner is exact, so whole slices).
  std::vector<float> anchor = start, m(kSize, 0.0f), g(kSize, 0.0f);
  std::vector<std::vector<float>> weights(kReplicas, start), sent(kReplicas);
  for (int t = 1; t <= kSteps; ++t) {
    for (int r = 0; r < kReplicas; ++r)
      for (size_t i = 0; i < kSize; ++i) weights[r][i] += steps[t - 1][r][i];
    if (t > kH && t % kH == kTau) {  // the exchange sent after t - tau lands
      for (size_t i = 0; i < kSize; ++i) {
        m[i] = mu * m[i] + g[i];
        anchor[i] -= lr * (g[i] + mu * m[i]);
        for (int r = 0; r < kReplicas; ++r) weights[r][i] = anchor[i] + (weights[r][i] - sent[r][i]);
      }
    }
    if (t % kH == 0) {  // sent: the mean outer gradient, summed in replica order
      for (size_t i = 0; i < kSize; ++i) {
        float sum = 0;
        for (int r = 0; r < kReplicas; ++r) sum += anchor[i] - weights[r][i];
        g[i] = sum * (1.0f / kReplicas);
      }
      sent = weights;
    }
  }
  for (int r = 0; r < kReplicas; ++r)
    for (size_t i = 0; i < kSize; ++i) CHECK(after[r * kDp][i] == Approx(weights[r][i]).margin(1e-6));
  // Replicas differ by their own progress since the last exchange was sent (step 9).
  CHECK(after[0] != after[kDp]);
  // Saved with an exchange in flight (after step 6, applied after 8) and resumed: the same bits.
  CHECK(run(6).first == after);
  CHECK(run(7).first == after);  // landed, waiting to be applied
}

TEST_CASE("outer sync times: each part of the exchange timed, reported with the step that applies it", "[outer]") {
  constexpr int kReplicas = 3, kDp = 2;
  constexpr size_t kSize = 3001;
  auto run = [&](int inner, int tau, int steps) {
    comm::test::Job job(comm::test::Impl::kInProcess, kReplicas * kDp);
    std::vector<std::vector<OuterTimes>> times(kReplicas * kDp);
    test::run_threads(kReplicas * kDp, [&](int rank) {
      ReplicaRank g(job, rank, kReplicas, kDp);
      OuterSync sync(OuterConfig{inner, 1, 0.7, 0.9, OuterDtype::kInt8, tau}, *g.outer, *g.data, kSize, &*g.side);
      std::vector<float> p = random_values(kSize, 5, 1.0f);
      sync.reset(p.data());
      for (int t = 1; t <= steps; ++t) {
        for (size_t i = 0; i < kSize; ++i) p[i] += 0.01f * static_cast<float>(rank + 1);
        sync.after_step(t, p.data());
        times[rank].push_back(sync.take_times());
      }
    });
    return times;
  };
  const size_t slice = (kSize + kDp - 1) / kDp, part = (slice + kReplicas - 1) / kReplicas;
  const double bytes = 2.0 * (kReplicas - 1) * schedule::outer_payload_size(OuterDtype::kInt8, part);
  auto training_thread = [](const OuterTimes& t) { return t.encode_ms + t.wait_ms + t.outer_step_ms + t.dp_gather_ms; };
  SECTION("blocking: sent and applied after the same step, the parts inside its time") {
    const auto times = run(2, 0, 4);
    for (const auto& rank : times) {
      for (int t : {0, 2}) CHECK(rank[t].empty());
      for (int t : {1, 3}) {
        const OuterTimes& x = rank[t];
        CHECK(x.syncs == 1);
        CHECK(x.applied == 1);
        CHECK(x.bytes == bytes);
        for (const auto& [name, ms] : x.parts()) CHECK(ms >= 0);
        CHECK(x.to_owners_ms > 0);
        CHECK(x.gather_ms > 0);
        // The exchange ran while the training thread waited: every part is inside total_ms.
        CHECK(training_thread(x) + x.exchange_ms() <= x.total_ms + 1e-9);
        CHECK(x.cpu_ms >= 0);
      }
    }
  }
  SECTION("overlapped: the exchange's parts come with the step that applies it") {
    const auto times = run(3, 2, 8);  // sent after 3 and 6, applied after 5 and 8
    for (const auto& rank : times) {
      for (int t : {3, 6}) {
        const OuterTimes& x = rank[t - 1];
        CHECK(x.syncs == 1);
        CHECK(x.applied == 0);
        CHECK(x.bytes == bytes);
        CHECK(x.encode_ms > 0);
        CHECK(x.exchange_ms() == 0);
        CHECK(x.outer_step_ms == 0);
      }
      for (int t : {5, 8}) {
        const OuterTimes& x = rank[t - 1];
        CHECK(x.syncs == 0);
        CHECK(x.applied == 1);
        CHECK(x.bytes == 0);
        CHECK(x.to_owners_ms > 0);
        CHECK(x.gather_ms > 0);
        CHECK(training_thread(x) <= x.total_ms + 1e-9);
      }
      for (int t : {1, 2, 4, 7}) CHECK(rank[t - 1].empty());
    }
  }
}
