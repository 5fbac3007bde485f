// SwiGLU (Llama's MLP activation): out = silu(gate) * up, silu(g) = g * sigmoid(g). The gate
// and up projections are one GEMM whose rows are [gate (F) | up (F)]. cuda/swiglu.cu is the
// GPU twin.
#include "model/cpu/cpu_ops.hpp"
#include "model/cpu/fast_math.hpp"

namespace holmes::model::cpu {

void swiglu_forward(float* out, const float* inp, int N, int F) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* gate = inp + static_cast<size_t>(n) * 2 * F;
    const float* up = gate + F;
    float* y = out + static_cast<size_t>(n) * F;
#pragma omp simd
    for (int i = 0; i < F; ++i) {
      const float g = gate[i];
      y[i] = g / (1.0f + fast_exp(-g)) * up[i];
    }
  }
}

void swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* gate = inp + static_cast<size_t>(n) * 2 * F;
    const float* up = gate + F;
    const float* dy = dout + static_cast<size_t>(n) * F;
    float* dgate = dinp + static_cast<size_t>(n) * 2 * F;
    float* dup = dgate + F;
#pragma omp simd
    for (int i = 0; i < F; ++i) {
      const float g = gate[i], s = 1.0f / (1.0f + fast_exp(-g));
      // d silu(g) / dg = s (1 + g (1 - s))
      dgate[i] = dy[i] * up[i] * s * (1.0f + g * (1.0f - s));
      dup[i] = dy[i] * g * s;
    }
  }
}

}  // namespace holmes::model::cpu
