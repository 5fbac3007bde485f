// Linear layers on OpenBLAS GEMMs (cuda/matmul.cpp is the GPU twin).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/cpu/cpu_ops.hpp"

namespace holmes::model::cpu {

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC) {
  float beta = 0.0f;
  if (bias != nullptr) {
    // Seed every output row with the bias so the GEMM adds onto it (beta = 1): one pass less
    // than a separate bias add after the product.
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) {
      float* row = out + static_cast<size_t>(n) * OC;
      for (int o = 0; o < OC; ++o) row[o] = bias[o];
    }
    beta = 1.0f;
  }
  // out (N,OC) = inp (N,C) @ weight (OC,C)^T
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, beta, out,
              OC);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC) {
  if (dinp != nullptr) {
    // dinp (N,C) = dout (N,OC) @ weight (OC,C)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C,
                0.0f, dinp, C);
  }
  if (dweight == nullptr) return;  // input gradient only (model/kernels.hpp)
  // dweight (OC,C) += dout^T (OC,N) @ inp (N,C)
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
              dweight, C);
  if (dbias != nullptr) {
    // Column sums of dout; each thread owns a block of columns, rows stream through cache.
    constexpr int kBlock = 256;
    const int blocks = (OC + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; ++blk) {
      const int o0 = blk * kBlock, o1 = std::min(OC, o0 + kBlock);
      float acc[kBlock] = {};
      for (int n = 0; n < N; ++n) {
        const float* row = dout + static_cast<size_t>(n) * OC;
#pragma omp simd
        for (int o = o0; o < o1; ++o) acc[o - o0] += row[o];
      }
      for (int o = o0; o < o1; ++o) dbias[o] += acc[o - o0];
    }
  }
}

}  // namespace holmes::model::cpu
