// Element-wise ops: GELU and the residual add (cuda/pointwise.cu is the GPU twin).
#include <algorithm>
#include <cmath>

#include "model/cpu/cpu_ops.hpp"
#include "model/cpu/fast_math.hpp"

namespace holmes::model::cpu {

namespace {
constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;
}  // namespace

void gelu_forward(float* out, const float* inp, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + fast_tanh(kGeluK * (x + kGeluA * x * x * x)));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float th = fast_tanh(kGeluK * (x + kGeluA * x * x * x));
    const float dth = (1.0f - th * th) * kGeluK * (1.0f + 3.0f * kGeluA * x * x);
    dinp[i] = dout[i] * (0.5f * (1.0f + th) + 0.5f * x * dth);
  }
}

void residual_forward(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void residual_backward(float* da, float* db, const float* dout, size_t n) {
  if (da != nullptr) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) da[i] += dout[i];
  }
  if (db != nullptr) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) db[i] += dout[i];
  }
}

}  // namespace holmes::model::cpu
