// LayerNorm (cuda/layernorm.cu is the GPU twin).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/cpu/cpu_ops.hpp"

namespace holmes::model::cpu {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
  constexpr float kEps = 1e-5f;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = inp + static_cast<size_t>(n) * C;
    float* y = out + static_cast<size_t>(n) * C;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < C; ++c) sum += x[c];
    const float m = sum / C;
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    const float s = 1.0f / std::sqrt(var / C + kEps);
#pragma omp simd
    for (int c = 0; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C) {
  // Per-thread partial sums of dweight and dbias (2C), added in thread order at the end so
  // the result does not depend on scheduling; each buffer lives as long as its thread, so
  // steady-state steps do not allocate.
  constexpr int kMaxThreads = 256;
  float* partial[kMaxThreads];
  const int threads = std::min(omp_get_max_threads(), kMaxThreads);
#pragma omp parallel num_threads(threads)
  {
    thread_local std::vector<float> acc;
    acc.assign(2 * static_cast<size_t>(C), 0.0f);
    float* dw = acc.data();
    float* db = acc.data() + C;
    partial[omp_get_thread_num()] = acc.data();
#pragma omp for schedule(static)
    for (int n = 0; n < N; ++n) {
      const float* x = inp + static_cast<size_t>(n) * C;
      const float* dy = dout + static_cast<size_t>(n) * C;
      float* dx = dinp + static_cast<size_t>(n) * C;
      const float m = mean[n], s = rstd[n];
      float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
#pragma omp simd reduction(+ : dnorm_mean, dnorm_norm_mean)
      for (int c = 0; c < C; ++c) {
        const float dnorm = weight[c] * dy[c];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * (x[c] - m) * s;
      }
      dnorm_mean /= C;
      dnorm_norm_mean /= C;
#pragma omp simd
      for (int c = 0; c < C; ++c) {
        const float norm = (x[c] - m) * s;
        dw[c] += norm * dy[c];
        db[c] += dy[c];
        dx[c] += s * (weight[c] * dy[c] - dnorm_mean - norm * dnorm_norm_mean);
      }
    }
    const int team = omp_get_num_threads();
#pragma omp barrier
#pragma omp for schedule(static)
    for (int c = 0; c < C; ++c) {
      for (int t = 0; t < team; ++t) {
        dweight[c] += partial[t][c];
        dbias[c] += partial[t][C + c];
      }
    }
  }
}

}  // namespace holmes::model::cpu
