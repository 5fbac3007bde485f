// Causal multi-head self-attention, one (batch, head) pair per OpenMP work item so every
// write of a work item lands in memory no other item touches.
#include <cmath>
#include <cstring>

#include "model/cpu/cpu_ops.hpp"
#include "model/cpu/fast_math.hpp"

namespace holmes::model::cpu {

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int HS = C / NH;
  const size_t C3 = 3 * static_cast<size_t>(C);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const float* base = qkv + static_cast<size_t>(b) * T * C3 + h * HS;
      for (int t = 0; t < T; ++t) {
        const float* q = base + t * C3;
        float* a = att + ((static_cast<size_t>(b) * NH + h) * T + t) * T;  // (T) row of (B,NH,T,T)
        float mx = -INFINITY;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* k = base + t2 * C3 + C;
          float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
          for (int i = 0; i < HS; ++i) dot += q[i] * k[i];
          a[t2] = dot * scale;
          mx = a[t2] > mx ? a[t2] : mx;
        }
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int t2 = 0; t2 <= t; ++t2) {
          a[t2] = fast_exp(a[t2] - mx);
          sum += a[t2];
        }
        const float inv = 1.0f / sum;
        for (int t2 = 0; t2 <= t; ++t2) a[t2] *= inv;
        for (int t2 = t + 1; t2 < T; ++t2) a[t2] = 0.0f;
        float* o = out + (static_cast<size_t>(b) * T + t) * C + h * HS;
        for (int i = 0; i < HS; ++i) o[i] = 0.0f;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* v = base + t2 * C3 + 2 * C;
          const float w = a[t2];
#pragma omp simd
          for (int i = 0; i < HS; ++i) o[i] += w * v[i];
        }
      }
    }
  }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH) {
  const int HS = C / NH;
  const size_t C3 = 3 * static_cast<size_t>(C);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const float* base = qkv + static_cast<size_t>(b) * T * C3 + h * HS;
      float* dbase = dqkv + static_cast<size_t>(b) * T * C3 + h * HS;
      for (int t = 0; t < T; ++t) {
        for (int part = 0; part < 3; ++part) std::memset(dbase + t * C3 + part * C, 0, HS * sizeof(float));
      }
      for (int t = 0; t < T; ++t) {
        const size_t row = ((static_cast<size_t>(b) * NH + h) * T + t) * T;
        const float* a = att + row;
        float* da = scratch + row;  // d(probabilities), then d(pre-softmax scores)
        const float* dy = dout + (static_cast<size_t>(b) * T + t) * C + h * HS;
        float dot_sum = 0.0f;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* v = base + t2 * C3 + 2 * C;
          float* dv = dbase + t2 * C3 + 2 * C;
          float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
          for (int i = 0; i < HS; ++i) {
            dot += dy[i] * v[i];
            dv[i] += a[t2] * dy[i];
          }
          da[t2] = dot;
          dot_sum += a[t2] * dot;
        }
        // Softmax backward: dscore = p * (dp - sum(p * dp)), then through the 1/sqrt(HS) scale.
        const float* q = base + t * C3;
        float* dq = dbase + t * C3;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float ds = a[t2] * (da[t2] - dot_sum) * scale;
          const float* k = base + t2 * C3 + C;
          float* dk = dbase + t2 * C3 + C;
#pragma omp simd
          for (int i = 0; i < HS; ++i) {
            dq[i] += ds * k[i];
            dk[i] += ds * q[i];
          }
        }
      }
    }
  }
}

}  // namespace holmes::model::cpu
