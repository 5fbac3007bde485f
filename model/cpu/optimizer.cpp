// The optimizer's ops: AdamW on a run of the flat buffer and the sum of squares behind the
// global gradient norm (model/kernels.hpp).
#include <cmath>
#include <cstddef>

#include "model/cpu/cpu_ops.hpp"

namespace holmes::model::cpu {

void adamw_update(float* p, float* m, float* v, const float* g, size_t n, const AdamWStep& s) {
  const float b1 = s.beta1, b2 = s.beta2;
#pragma omp parallel for simd schedule(static) if (n > 16384)
  for (size_t i = 0; i < n; ++i) {
    float gi = g[i] * s.grad_scale;
    float mi = b1 * m[i] + (1.0f - b1) * gi;
    float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float denom = std::sqrt(vi) * s.inv_sqrt_bc2 + s.eps;
    p[i] = p[i] * s.decay_factor - s.step_size * mi / denom;
  }
}

void sum_squares_forward(double* sq, const float* x, size_t n_in) {
  double sum = 0;
  const ptrdiff_t n = static_cast<ptrdiff_t>(n_in);
#pragma omp parallel for reduction(+ : sum) schedule(static) if (n > 16384)
  for (ptrdiff_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  *sq += sum;
}

void mean_forward(float* mean, const float* x, int N) {
  double sum = 0.0;
  for (int i = 0; i < N; ++i) sum += x[i];
  *mean = static_cast<float>(sum / N);
}

void scale_forward(float* x, float s, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace holmes::model::cpu
