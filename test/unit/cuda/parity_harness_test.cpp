// The host half of the parity harness (parity.hpp): the error measure, the guard images and
// the table rows. Runs without a GPU: these decide whether a GPU parity row passes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "cuda/layernorm.hpp"
#include "cuda/optimizer.hpp"
#include "cuda/row_split.hpp"
#include "cuda/scratch.hpp"
#include "cuda/vocab.hpp"
#include "cuda_test_util.hpp"
#include "parity.hpp"

using namespace holmes;
using namespace holmes::cuda::parity;

TEST_CASE("normalized_error: relative for large elements, scaled by the mean for small ones",
          "[cuda][parity]") {
  const std::vector<double> want = {1.0, -3.0, 0.0, 4.0};  // mean |want| = 2
  CHECK(normalized_error(want, want) == 0.0);
  // 0.1 off on the 4.0: 0.1 / (4 + 2)
  CHECK(normalized_error({1.0, -3.0, 0.0, 4.1}, want) == Approx(0.1 / 6.0));
  // 0.1 off on the 0.0: 0.1 / (0 + 2), the worst element wins
  CHECK(normalized_error({1.0, -3.0, 0.1, 4.1}, want) == Approx(0.1 / 2.0));
  // A wrong small element in a tensor of large ones is still seen: 1e-3 / (1e-3 + ~1)
  std::vector<double> big(1000, 1.0);
  big[0] = 1e-3;
  std::vector<double> got = big;
  got[0] = 0.0;
  CHECK(normalized_error(got, big) > 9e-4);
  CHECK(normalized_error(got, big) < 1.1e-3);
}

TEST_CASE("normalized_error: NaN, infinity and a size mismatch are infinite error",
          "[cuda][parity]") {
  const std::vector<double> want = {1.0, 2.0};
  CHECK(std::isinf(normalized_error({1.0, NAN}, want)));
  CHECK(std::isinf(normalized_error({INFINITY, 2.0}, want)));
  CHECK(std::isinf(normalized_error({1.0}, want)));
  CHECK(normalized_error({0.0}, {0.0}) == 0.0);  // all-zero reference: no division by zero
}

TEST_CASE("normalized_error: a NaN reference fails, an infinite one must be met exactly",
          "[cuda][parity]") {
  // A NaN in the CPU reference must not turn every ratio into NaN (which fmax skips).
  CHECK(std::isinf(normalized_error({1.0, 5.0}, {1.0, NAN})));
  CHECK(std::isinf(normalized_error({7.0, NAN}, {1.0, NAN})));
  // -inf (the max of a shard of padding only) is matched exactly and does not swamp the mean.
  CHECK(normalized_error({1.0, -INFINITY}, {1.0, -INFINITY}) == 0.0);
  CHECK(std::isinf(normalized_error({1.0, 5.0}, {1.0, -INFINITY})));
  CHECK(normalized_error({1.5, -INFINITY}, {1.0, -INFINITY}) == Approx(0.5 / 2.0));
}

TEST_CASE("worst_ratio: a NaN reference or a size mismatch fails", "[cuda][parity]") {
  using holmes::cuda::test::worst_ratio;
  CHECK(worst_ratio({1.0f, 2.0f}, {1.0, 2.0}, 1e-6, 1e-6) == 0.0);
  CHECK(std::isinf(worst_ratio({1.0f, 2.0f}, {1.0, NAN}, 1e-6, 1e-6)));
  CHECK(std::isinf(worst_ratio({1.0f}, {1.0, 2.0}, 1e-6, 1e-6)));
  CHECK(worst_ratio({-INFINITY}, {-INFINITY}, 1e-6, 1e-6) == 0.0);
}

TEST_CASE("guard images: poison is NaN, a write next to the data is caught on either side",
          "[cuda][parity]") {
  const std::size_t n = 5, bytes = n * sizeof(float);
  auto poisoned = guarded_image(nullptr, bytes);
  REQUIRE(poisoned.size() == bytes + 2 * kGuardBytes);
  float f;
  std::memcpy(&f, poisoned.data() + kGuardBytes + 4, sizeof f);
  CHECK(std::isnan(f));
  model::bf16 h;
  std::memcpy(&h, poisoned.data() + kGuardBytes, sizeof h);
  CHECK(std::isnan(model::bf16_to_float(h)));
  CHECK(guard_problem(poisoned, bytes).empty());

  const std::vector<float> data = {1, 2, 3, 4, 5};
  auto image = guarded_image(data.data(), bytes);
  CHECK(std::memcmp(image.data() + kGuardBytes, data.data(), bytes) == 0);
  image[kGuardBytes + 3] = 0;  // inside the data: not a guard problem
  CHECK(guard_problem(image, bytes).empty());

  auto after = image;
  after[kGuardBytes + bytes] = 0;  // one element written past the end
  const std::string a = guard_problem(after, bytes);
  CHECK(a.find("after") != std::string::npos);
  CHECK(a.find("first at guard byte 0") != std::string::npos);

  auto before = image;
  before[kGuardBytes - 1] = 0;  // one byte before the start
  before[kGuardBytes - 2] = 0;
  const std::string b = guard_problem(before, bytes);
  CHECK(b.find("2 byte(s) of the guard before") != std::string::npos);
  CHECK(b.find("after") == std::string::npos);
  CHECK(!guard_problem(std::vector<std::uint8_t>(3), bytes).empty());
}

TEST_CASE("table rows: within tolerance and no problem is ok, anything else fails",
          "[cuda][parity]") {
  Table t;
  t.compare("op", "fp32", "B1", "out", {1.0, 2.0}, {1.0, 2.0}, 1e-5, "");
  t.compare("op", "fp32", "B1", "out", {1.0, 2.1}, {1.0, 2.0}, 1e-5, "");
  t.compare("op", "bf16", "B1", "out", {1.0, 2.0}, {1.0, 2.0}, 1e-2, "1 byte(s) of the guard after");
  t.fail("op", "bf16", "B1", "CudaError: illegal address");
  REQUIRE(t.rows().size() == 4);
  CHECK(t.rows()[0].ok());
  CHECK(!t.rows()[1].ok());
  CHECK(!t.rows()[2].ok());  // exact values but a damaged guard
  CHECK(!t.rows()[3].ok());
  CHECK(format_row(t.rows()[0]).find("| ok |") != std::string::npos);
  CHECK(format_row(t.rows()[2]).find("FAIL") != std::string::npos);
  CHECK(format_row(t.rows()[2]).find("out: 1 byte(s)") != std::string::npos);
  CHECK(format_row(t.rows()[3]).find("threw: CudaError") != std::string::npos);
}

TEST_CASE("bf16 rounding of the harness matches the storage conversion", "[cuda][parity]") {
  std::vector<float> v = {1.0f + 1.0f / 256, 1.0f + 3.0f / 512, -2.71828f, 1e-3f};
  const auto stored = store_as<model::bf16>(v);
  round_as<model::bf16>(v);
  for (std::size_t i = 0; i < v.size(); ++i) CHECK(widen(stored[i]) == double(v[i]));
  CHECK(v[0] == 1.0f);                // tie: to even
  CHECK(v[1] == 1.0f + 1.0f / 128);   // above the tie: up
  auto f = std::vector<float>{0.1f};
  round_as<float>(f);
  CHECK(f[0] == 0.1f);  // fp32 storage: unchanged
}

// The summation orders of the deterministic reductions are functions of the sizes alone
// (host arithmetic in cuda/*.cu).
TEST_CASE("deterministic reductions: sort keys and group counts depend on the sizes alone",
          "[cuda][parity]") {
  // Keys row * N + position with row in [0, Vl]: the largest is Vl * N + N - 1.
  CHECK(cuda::embedding_sort_bits(1, 0) == 1);
  CHECK(cuda::embedding_sort_bits(4, 1) == 3);      // keys < 8
  CHECK(cuda::embedding_sort_bits(4, 2) == 4);      // keys < 12
  CHECK(cuda::embedding_sort_bits(16384, 50304) == 30);
  for (int N : {1, 7, 4096, 16384, 1 << 20})
    for (int Vl : {1, 77, 50304}) {
      const int bits = cuda::embedding_sort_bits(N, Vl);
      const unsigned long long limit = (unsigned long long)(Vl + 1) * N;
      CHECK((1ull << bits) >= limit);
      CHECK((bits == 1 || (1ull << (bits - 1)) < limit));
    }
  CHECK(cuda::layernorm_group_rows(1) == 64);
  CHECK(cuda::layernorm_group_rows(16384) == 64);
  CHECK(cuda::layernorm_group_rows(64 * 65535) == 64);
  CHECK(cuda::layernorm_group_rows(64 * 65535 + 1) == 128);
  CHECK(cuda::sum_squares_blocks(1) == 1);
  CHECK(cuda::sum_squares_blocks(4096) == 1);
  CHECK(cuda::sum_squares_blocks(4097) == 2);
  CHECK(cuda::sum_squares_blocks(124'000'000) == 1024);
}

// The row traversal of the vocabulary kernels (cuda/row_split.hpp): every element exactly
// once, packs only at 16-byte boundaries, heads and tails shorter than a pack.
TEST_CASE("split_row covers a row once with aligned packs, for every offset and length",
          "[cuda][parity]") {
  for (int elem : {2, 4})
    for (std::uintptr_t offset = 0; offset < 16; offset += elem)
      for (int n = 0; n <= 50; ++n) {
        INFO("elem " << elem << " offset " << offset << " n " << n);
        const std::uintptr_t addr = 4096 + offset;
        const int per_pack = 16 / elem;
        const auto s = cuda::split_row(addr, n, elem);
        REQUIRE(s.head >= 0);
        REQUIRE(s.packs >= 0);
        const int tail = n - s.head - s.packs * per_pack;
        CHECK(tail >= 0);
        CHECK(s.head < per_pack);                            // a head is less than one pack
        CHECK((s.head == n || tail < per_pack));             // so is a tail, after packs
        if (s.packs > 0) CHECK((addr + s.head * elem) % 16 == 0);
        if (s.head < n) CHECK((addr + s.head * elem) % 16 == 0);  // head stops at the boundary
        // The same alignment for out and in: one split; different: all scalar.
        const auto same = cuda::split_row_pair(addr + 32, addr, n, elem);
        CHECK((same.head == s.head && same.packs == s.packs));
        const auto other = cuda::split_row_pair(addr + elem, addr, n, elem);
        CHECK((other.head == n && other.packs == 0));
      }
}

TEST_CASE("ScratchLayout places sub-buffers at 256-byte boundaries without overlap",
          "[cuda][parity]") {
  cuda::ScratchLayout layout;
  const std::size_t a = layout.add(8 * 7), b = layout.add(8 * 7), c = layout.add(0),
                    d = layout.add(1000);
  CHECK(a == 0);
  CHECK(b == 256);  // 56 bytes rounded up to the next boundary
  CHECK(c == 512);
  CHECK(d == 512);  // an empty buffer takes no room
  CHECK(layout.bytes() == 1512);
  for (std::size_t off : {a, b, c, d}) CHECK(off % cuda::ScratchLayout::kAlign == 0);
}
