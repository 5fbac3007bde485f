// Double-precision row-major reference of gemm.hpp's contract, shared by the GPU parity
// test and the GPU-free layout test.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/gemm.hpp"

namespace holmes::cuda::test {

// What validate_gemm says about s ("no error" when it accepts it).
inline std::string validate_message(const GemmShape& s) {
  try {
    validate_gemm(s);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

// C (all batches, size >= batch stride * batch) = alpha op(A) op(B) + beta C0 (+ bias),
// honouring the leading dimensions (lda, ldb, ldc; 0 = packed).
inline std::vector<double> reference(const GemmShape& s, const std::vector<float>& a,
                                     const std::vector<float>& b, const std::vector<float>& bias,
                                     const std::vector<float>& c0, float alpha, float beta) {
  std::vector<double> c(c0.begin(), c0.end());
  const std::int64_t lda = effective_lda(s), ldb = effective_ldb(s), ldc = effective_ldc(s);
  for (int bi = 0; bi < s.batch; ++bi) {
    const float* pa = a.data() + bi * s.stride_a;
    const float* pb = b.data() + bi * s.stride_b;
    for (int i = 0; i < s.m; ++i)
      for (int j = 0; j < s.n; ++j) {
        double sum = 0;
        for (int p = 0; p < s.k; ++p) {
          double av = s.trans_a ? pa[p * lda + i] : pa[i * lda + p];
          double bv = s.trans_b ? pb[j * ldb + p] : pb[p * ldb + j];
          sum += av * bv;
        }
        double& out = c[bi * s.stride_c + i * ldc + j];
        out = alpha * sum + beta * out + (s.bias ? bias[j] : 0.0);
      }
  }
  return c;
}

}  // namespace holmes::cuda::test
