// Causal multi-head self-attention. One (batch, head) pair per OpenMP work item; inside it
// the products are single-threaded sgemm calls (OpenBLAS runs one thread when called inside
// a parallel region), so long sequences run at GEMM speed. The full T x T score matrix is
// computed and the part above the diagonal discarded: twice the needed flops, still far
// faster than dot-product loops.
#include <cblas.h>

#include <cmath>

#include "model/cpu/cpu_ops.hpp"
#include "model/cpu/fast_math.hpp"

namespace holmes::model::cpu {
namespace {

// Row t of the scores (T) -> causal softmax probabilities; entries beyond t become 0.
void causal_softmax_row(float* a, int t, int T) {
  float mx = -INFINITY;
  for (int t2 = 0; t2 <= t; ++t2) mx = a[t2] > mx ? a[t2] : mx;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int t2 = 0; t2 <= t; ++t2) {
    a[t2] = fast_exp(a[t2] - mx);
    sum += a[t2];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int t2 = 0; t2 <= t; ++t2) a[t2] *= inv;
  for (int t2 = t + 1; t2 < T; ++t2) a[t2] = 0.0f;
}

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int HS = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const float* q = qkv + static_cast<size_t>(b) * T * C3 + h * HS;  // (T,HS), row stride 3C
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* p = att + (static_cast<size_t>(b) * NH + h) * T * T;  // (T,T)
      float* o = out + static_cast<size_t>(b) * T * C + h * HS;      // (T,HS), row stride C
      // scores = scale * q @ k^T, then row-wise causal softmax
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HS, scale, q, C3, k, C3, 0.0f, p, T);
      for (int t = 0; t < T; ++t) causal_softmax_row(p + static_cast<size_t>(t) * T, t, T);
      // out = p @ v
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HS, T, 1.0f, p, T, v, C3, 0.0f, o, C);
    }
  }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH) {
  const int HS = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const size_t row0 = static_cast<size_t>(b) * T * C3 + h * HS;
      const float* q = qkv + row0;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = dqkv + row0;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      const float* p = att + (static_cast<size_t>(b) * NH + h) * T * T;
      float* ds = scratch + (static_cast<size_t>(b) * NH + h) * T * T;
      const float* dy = dout + static_cast<size_t>(b) * T * C + h * HS;
      // dv = p^T @ dy;  dp = dy @ v^T
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HS, T, 1.0f, p, T, dy, C, 0.0f, dv, C3);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HS, 1.0f, dy, C, v, C3, 0.0f, ds, T);
      // Softmax backward, row by row: ds = p * (dp - sum(p * dp)) * scale (0 above the diagonal).
      for (int t = 0; t < T; ++t) {
        const float* pr = p + static_cast<size_t>(t) * T;
        float* dr = ds + static_cast<size_t>(t) * T;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int t2 = 0; t2 <= t; ++t2) dot += pr[t2] * dr[t2];
#pragma omp simd
        for (int t2 = 0; t2 <= t; ++t2) dr[t2] = pr[t2] * (dr[t2] - dot) * scale;
        for (int t2 = t + 1; t2 < T; ++t2) dr[t2] = 0.0f;
      }
      // dq = ds @ k;  dk = ds^T @ q
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HS, T, 1.0f, ds, T, k, C3, 0.0f, dq, C3);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HS, T, 1.0f, ds, T, q, C3, 0.0f, dk, C3);
    }
  }
}

}  // namespace holmes::model::cpu
