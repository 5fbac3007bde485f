// RMSNorm (Llama): y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps). cuda/rmsnorm.cu is the
// GPU twin.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/cpu/cpu_ops.hpp"

namespace holmes::model::cpu {

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                     float eps) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = inp + static_cast<size_t>(n) * C;
    float* y = out + static_cast<size_t>(n) * C;
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (int c = 0; c < C; ++c) sq += x[c] * x[c];
    const float s = 1.0f / std::sqrt(sq / C + eps);
#pragma omp simd
    for (int c = 0; c < C; ++c) y[c] = x[c] * s * weight[c];
    rstd[n] = s;
  }
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int N, int C) {
  // dx = rstd * (w dy - norm * mean(w dy norm)), norm = x * rstd; dw += dy * norm. Per-thread
  // partial dweight (C), added in thread order so the sum does not depend on scheduling (as
  // layernorm_backward).
  constexpr int kMaxThreads = 256;
  float* partial[kMaxThreads];
  const int threads = std::min(omp_get_max_threads(), kMaxThreads);
#pragma omp parallel num_threads(threads)
  {
    thread_local std::vector<float> acc;
    acc.assign(static_cast<size_t>(C), 0.0f);
    float* dw = acc.data();
    partial[omp_get_thread_num()] = acc.data();
#pragma omp for schedule(static)
    for (int n = 0; n < N; ++n) {
      const float* x = inp + static_cast<size_t>(n) * C;
      const float* dy = dout + static_cast<size_t>(n) * C;
      float* dx = dinp + static_cast<size_t>(n) * C;
      const float s = rstd[n];
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int c = 0; c < C; ++c) dot += weight[c] * dy[c] * x[c] * s;
      dot /= C;
#pragma omp simd
      for (int c = 0; c < C; ++c) {
        const float norm = x[c] * s;
        dw[c] += dy[c] * norm;
        dx[c] += s * (weight[c] * dy[c] - norm * dot);
      }
    }
    const int team = omp_get_num_threads();
#pragma omp barrier
#pragma omp for schedule(static)
    for (int c = 0; c < C; ++c)
      for (int t = 0; t < team; ++t) dweight[c] += partial[t][c];
  }
}

}  // namespace holmes::model::cpu
