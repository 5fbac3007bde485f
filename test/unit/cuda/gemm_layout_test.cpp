// The row-major -> column-major mapping handed to cuBLASLt, checked without a GPU: a host
// GEMM that follows cuBLASLt's column-major rules on the mapped operands must reproduce the
// row-major reference for every transpose combination, odd shapes and strided batches.
#include "cuda/gemm_layout.hpp"

#include <catch2/catch.hpp>

#include "cuda_test_util.hpp"
#include "gemm_reference.hpp"

using namespace holmes::cuda;
using namespace holmes::cuda::test;

namespace {

// Element (i, j) of op(X) for a column-major operand X stored at `x`.
double op_at(const LtOperand& o, const float* x, int i, int j) {
  return o.transposed ? x[j + std::int64_t(i) * o.ld] : x[i + std::int64_t(j) * o.ld];
}

// What cuBLASLt computes: D = alpha op(A) op(B) + beta C, column-major, with A = our b,
// B = our a (gemm_layout.hpp), bias[i] added to row i of D.
std::vector<double> column_major_gemm(const LtProblem& p, int batch, const std::vector<float>& a,
                                      const std::vector<float>& b, const std::vector<float>& bias,
                                      bool with_bias, const std::vector<float>& c0, float alpha,
                                      float beta) {
  std::vector<double> d(c0.begin(), c0.end());
  for (int bi = 0; bi < batch; ++bi) {
    const float* lt_a = b.data() + bi * p.lt_a.batch_stride;
    const float* lt_b = a.data() + bi * p.lt_b.batch_stride;
    for (int i = 0; i < p.m; ++i)
      for (int j = 0; j < p.n; ++j) {
        double sum = 0;
        for (int l = 0; l < p.k; ++l) sum += op_at(p.lt_a, lt_a, i, l) * op_at(p.lt_b, lt_b, l, j);
        double& out = d[bi * p.lt_c.batch_stride + i + std::int64_t(j) * p.lt_c.ld];
        out = alpha * sum + beta * out + (with_bias ? bias[i] : 0.0);
      }
  }
  return d;
}

// op(X) must be [want_rows, want_cols] and the leading dimension must cover the rows.
void check_dims(const LtOperand& o, int want_rows, int want_cols) {
  CHECK((o.transposed ? o.cols : o.rows) == want_rows);
  CHECK((o.transposed ? o.rows : o.cols) == want_cols);
  CHECK(o.ld >= o.rows);
}

}  // namespace

TEST_CASE("row-major GEMM maps onto column-major cuBLASLt operands", "[cuda][gemm]") {
  const int shapes[][3] = {{1, 1, 1}, {5, 7, 11}, {13, 5, 7}, {4, 16, 3}};
  unsigned seed = 50;
  for (auto& mnk : shapes)
    for (int t = 0; t < 8; ++t) {
      GemmShape s;
      s.m = mnk[0];
      s.n = mnk[1];
      s.k = mnk[2];
      s.trans_a = t & 1;
      s.trans_b = t & 2;
      s.bias = !(t & 4);
      if (t & 4) {  // batched, shared B, padded C
        s.batch = 3;
        s.stride_a = std::int64_t(s.m) * s.k + 2;
        s.stride_b = 0;
        s.stride_c = std::int64_t(s.m) * s.n + 1;
      }
      INFO(describe(s));
      const LtProblem p = to_column_major(s);
      CHECK(p.m == s.n);
      CHECK(p.n == s.m);
      check_dims(p.lt_a, p.m, p.k);
      check_dims(p.lt_b, p.k, p.n);
      check_dims(p.lt_c, p.m, p.n);
      CHECK_FALSE(p.lt_c.transposed);

      std::size_t na = s.stride_a * (s.batch - 1) + std::size_t(s.m) * s.k;
      std::size_t nb = s.stride_b * (s.batch - 1) + std::size_t(s.k) * s.n;
      std::size_t nc = s.batch > 1 ? s.stride_c * s.batch : std::size_t(s.m) * s.n;
      auto a = random_floats(na, seed++), b = random_floats(nb, seed++);
      auto c0 = random_floats(nc, seed++), bias = random_floats(s.n, seed++);
      auto want = reference(s, a, b, bias, c0, 0.75f, 0.5f);
      auto got = column_major_gemm(p, s.batch, a, b, bias, s.bias, c0, 0.75f, 0.5f);
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < want.size(); ++i)
        REQUIRE(got[i] == Approx(want[i]).margin(1e-12));
    }
}

// Heads read in place from an interleaved buffer: each operand's rows are wider than the
// matrix (lda, ldb, ldc) and the batches sit side by side in those rows (stride = a head's
// width), as the attention fallback reads Q, K, V from (T, 3C) and writes (T, C).
TEST_CASE("row-major GEMM with leading dimensions maps onto cuBLASLt operands", "[cuda][gemm]") {
  unsigned seed = 70;
  for (int t = 0; t < 4; ++t) {
    GemmShape s;
    s.m = 7;
    s.n = 5;
    s.k = 3;
    s.trans_a = t & 1;
    s.trans_b = t & 2;
    s.batch = 4;
    s.lda = 4 * 8 + 1;  // wider than any stored row below: [7,3] or [3,7]
    s.ldb = 4 * 6 + 3;
    s.ldc = 4 * s.n + 2;
    s.stride_a = 8;
    s.stride_b = 6;
    s.stride_c = s.n;
    INFO(describe(s));
    REQUIRE_NOTHROW(validate_gemm(s));
    const LtProblem p = to_column_major(s);
    CHECK(p.lt_a.ld == s.ldb);
    CHECK(p.lt_b.ld == s.lda);
    CHECK(p.lt_c.ld == s.ldc);
    check_dims(p.lt_a, p.m, p.k);
    check_dims(p.lt_b, p.k, p.n);
    check_dims(p.lt_c, p.m, p.n);
    const int rows_a = s.trans_a ? s.k : s.m, rows_b = s.trans_b ? s.n : s.k;
    auto a = random_floats(std::size_t(rows_a) * s.lda, seed++);
    auto b = random_floats(std::size_t(rows_b) * s.ldb, seed++);
    auto c0 = random_floats(std::size_t(s.m) * s.ldc, seed++), bias = random_floats(s.n, seed++);
    auto want = reference(s, a, b, bias, c0, 0.75f, 0.5f);
    auto got = column_major_gemm(p, s.batch, a, b, bias, false, c0, 0.75f, 0.5f);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == Approx(want[i]).margin(1e-12));
  }
}

TEST_CASE("GEMM validation refuses leading dimensions shorter than a row", "[cuda][gemm]") {
  GemmShape s;
  s.m = 4;
  s.n = 6;
  s.k = 5;
  s.trans_b = false;
  s.lda = 4;  // A is [4,5]: rows of 5
  CHECK_THROWS_WITH(validate_gemm(s), Catch::Contains("lda = 4"));
  s.lda = 0;
  s.ldc = 5;
  CHECK_THROWS_WITH(validate_gemm(s), Catch::Contains("ldc = 5"));
  s.ldc = 13;  // two batches of 6 columns side by side fit in 13
  s.batch = 2;
  s.stride_c = 6;
  CHECK_NOTHROW(validate_gemm(s));
  s.batch = 3;  // the third would end at column 18 > 13
  CHECK_THROWS_WITH(validate_gemm(s), Catch::Contains("stride_c"));
}

// cuBLASLt wants the GELU aux leading dimension (C's) divisible by 8 and may call any other an
// invalid value: supports() must answer false before asking it (no GPU needed), so the
// callers take the unfused path instead of throwing.
TEST_CASE("GELU epilogues with an aux leading dimension not divisible by 8 are not supported", "[cuda][gemm]") {
  GemmRunner runner;
  int dummy[4] = {};  // never dereferenced: the answer comes before any GPU work
  GemmShape s;
  s.m = 6;
  s.n = 36;  // the MLP of C = 9: 4C = 36
  s.k = 9;
  for (GemmEpilogue e : {GemmEpilogue::kGelu, GemmEpilogue::kDGelu}) {
    s.epilogue = e;
    CHECK_FALSE(runner.supports(dummy, dummy, dummy, nullptr, dummy, s));
  }
  CHECK(runner.cached_plans() == 0);
}
