// OuterSync (outer_sync.hpp): the payload codecs, the staggered fragment schedule, and one
// outer step of 3 replicas x 2 data-parallel ranks against the formulas written out here.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "engine/parallel/outer_sync.hpp"
#include "engine/plan/replicas.hpp"
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
  std::vector<std::byte> wire(outer_payload_size(dtype, x.size()));
  outer_encode(dtype, x.data(), x.size(), wire.data());
  std::vector<float> out(x.size(), 0.0f);
  outer_decode_add(dtype, wire.data(), x.size(), out.data());
  return out;
}

}  // namespace

TEST_CASE("outer payload: fp32 exact, bf16 and int8 within their rounding, sizes as the planner prices", "[outer]") {
  for (size_t n : {size_t{1}, size_t{255}, size_t{256}, size_t{1000}, size_t{4099}}) {
    const auto x = random_values(n, static_cast<uint32_t>(n), 1e-3f);
    for (OuterDtype d : {OuterDtype::kFp32, OuterDtype::kBf16, OuterDtype::kInt8}) {
      const size_t bytes = outer_payload_size(d, n);
      CHECK(bytes % 4 == 0);
      CHECK(bytes >= plan::outer_payload_bytes(d, static_cast<double>(n)));
      CHECK(bytes < plan::outer_payload_bytes(d, static_cast<double>(n)) + 4);
    }
    CHECK(round_trip(OuterDtype::kFp32, x) == x);
    const auto b = round_trip(OuterDtype::kBf16, x);
    for (size_t i = 0; i < n; ++i) CHECK(std::fabs(b[i] - x[i]) <= std::fabs(x[i]) * 0x1p-8f);
    const auto q = round_trip(OuterDtype::kInt8, x);
    for (size_t c = 0; c < n; c += plan::kOuterChunk) {
      float amax = 0;
      for (size_t i = c; i < std::min(n, c + plan::kOuterChunk); ++i) amax = std::max(amax, std::fabs(x[i]));
      for (size_t i = c; i < std::min(n, c + plan::kOuterChunk); ++i)
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
  CHECK(s.state_floats() == 100);
}

TEST_CASE("outer step: 3 replicas x 2 data-parallel ranks take the Nesterov step on the mean change", "[outer]") {
  constexpr int kReplicas = 3, kDp = 2;
  constexpr size_t kSize = 1001;  // odd: the last data-parallel slice is shorter
  const double lr = 0.7, mu = 0.9;
  const auto start = random_values(kSize, 7, 1.0f);
  // Replica r's weights after two rounds of inner steps: start + step_k(r).
  std::vector<std::vector<float>> step1(kReplicas), step2(kReplicas);
  for (int r = 0; r < kReplicas; ++r) {
    step1[r] = random_values(kSize, 100 + r, 0.01f);
    step2[r] = random_values(kSize, 200 + r, 0.01f);
  }
  for (OuterDtype dtype : {OuterDtype::kFp32, OuterDtype::kInt8}) {
    DYNAMIC_SECTION(to_string(dtype)) {
      comm::test::Job job(comm::test::Impl::kInProcess, kReplicas * kDp);
      std::vector<std::vector<float>> after(kReplicas * kDp);
      test::run_threads(kReplicas * kDp, [&](int rank) {
        const int r = rank / kDp, d = rank % kDp;
        std::vector<int> outer_members, dp_members;
        for (int i = 0; i < kReplicas; ++i) outer_members.push_back(i * kDp + d);
        for (int i = 0; i < kDp; ++i) dp_members.push_back(r * kDp + i);
        auto outer_pg = job.group(nullptr, "outer" + std::to_string(d), outer_members, rank);
        auto dp_pg = job.group(nullptr, "dp" + std::to_string(r), dp_members, rank);
        auto mem = model::cpu::make_host_memory();
        CommClock clock;
        Group outer(*outer_pg, nullptr, *mem, clock, {});
        Group dp(*dp_pg, nullptr, *mem, clock, {});
        OuterSync sync(OuterConfig{2, 1, lr, mu, dtype}, outer, dp, kSize);
        std::vector<float> p = start;
        sync.reset(p.data());
        CHECK(sync.after_step(1, p.data()) == 0);  // not due
        for (size_t i = 0; i < kSize; ++i) p[i] += step1[r][i];
        CHECK(sync.after_step(2, p.data()) == 1);
        for (size_t i = 0; i < kSize; ++i) p[i] += step2[r][i];
        CHECK(sync.after_step(4, p.data()) == 1);
        after[rank] = p;
        CHECK(sync.bytes_sent() == 2.0 * outer_payload_size(dtype, (kSize + 1) / 2) * (kReplicas - 1));
      });
      // Every rank of every replica holds the same weights afterwards.
      for (int rank = 1; rank < kReplicas * kDp; ++rank) CHECK(after[rank] == after[0]);
      // The formulas (fp32 exactly up to float rounding; int8 within its quantization).
      std::vector<double> anchor(start.begin(), start.end()), m(kSize, 0.0);
      for (const auto* steps : {&step1, &step2}) {
        for (size_t i = 0; i < kSize; ++i) {
          double g = 0;
          for (int r = 0; r < kReplicas; ++r) g -= (*steps)[r][i];
          g /= kReplicas;
          m[i] = mu * m[i] + g;
          anchor[i] -= lr * (g + mu * m[i]);
        }
      }
      const double tol = dtype == OuterDtype::kFp32 ? 1e-5 : 2e-3;
      for (size_t i = 0; i < kSize; ++i) CHECK(after[0][i] == Approx(anchor[i]).margin(tol));
    }
  }
}
