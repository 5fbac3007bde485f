// Rotary position embedding, Hugging Face's rotate-half convention (cuda/rope.cu is the GPU
// twin): in each head of HS channels, channel i < HS/2 pairs with channel i + HS/2 and the pair
// turns by the angle t * theta^(-2i/HS) of the row's position t.
#include "model/cpu/cpu_ops.hpp"

namespace holmes::model::cpu {
namespace {

// dir = +1 turns forward (the forward op), -1 backward (its transpose, the backward op).
void rotate(float* out, const float* inp, const float* cos_sin, const int* pos, int B, int T, int H, int HS,
            int stride, float dir) {
  const int half = HS / 2;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const int at = pos != nullptr ? pos[static_cast<size_t>(b) * T + t] : t;  // position in its document
      const float* cs = cos_sin + static_cast<size_t>(at) * HS;  // [cos (HS/2) | sin (HS/2)]
      const size_t row = (static_cast<size_t>(b) * T + t) * stride;
      for (int h = 0; h < H; ++h) {
        const float* x = inp + row + static_cast<size_t>(h) * HS;
        float* y = out + row + static_cast<size_t>(h) * HS;
#pragma omp simd
        for (int i = 0; i < half; ++i) {
          const float c = cs[i], s = dir * cs[half + i];
          const float x0 = x[i], x1 = x[half + i];  // both read before either is written
          y[i] = x0 * c - x1 * s;
          y[half + i] = x1 * c + x0 * s;
        }
      }
    }
  }
}

}  // namespace

void rope_forward(float* out, const float* inp, const float* cos_sin, int B, int T, int H, int HS, int stride,
                  const int* pos) {
  rotate(out, inp, cos_sin, pos, B, T, H, HS, stride, 1.0f);
}

void rope_backward(float* dinp, const float* dout, const float* cos_sin, int B, int T, int H, int HS,
                   int stride, const int* pos) {
  rotate(dinp, dout, cos_sin, pos, B, T, H, HS, stride, -1.0f);
}

}  // namespace holmes::model::cpu
