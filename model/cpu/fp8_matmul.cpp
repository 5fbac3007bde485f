// The linear layer with FP8 GEMMs on the host (cuda/matmul_fp8.cpp is the GPU twin): each
// GEMM input is cast with its own current scale, the GEMM multiplies the codes, and a GEMM
// whose shape the FP8 kernels cannot take runs in bf16 instead (fp8_ops.hpp).
#include <vector>

#include "model/cpu/cpu_ops.hpp"
#include "model/cpu/fp8_ops.hpp"

namespace holmes::model::cpu {

namespace {

std::vector<float> widened(const bf16* p, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = bf16_to_float(p[i]);
  return v;
}

// One tensor cast with its current scale: codes as stored and/or transposed, and the scale
// that undoes the cast.
struct Quantized {
  std::vector<std::uint8_t> codes, codes_t;
  float scale_inv = 1.0f;
};

Quantized quantize(const bf16* x, int rows, int cols, Fp8Format f, bool stored, bool transposed) {
  Quantized q;
  float amax = 0;
  amax_forward(&amax, x, size_t(rows) * cols);
  if (stored) q.codes.resize(size_t(rows) * cols);
  if (transposed) q.codes_t.resize(size_t(rows) * cols);
  cast_transpose_to_fp8(stored ? q.codes.data() : nullptr, transposed ? q.codes_t.data() : nullptr, &q.scale_inv, x,
                        rows, cols, &amax, f);
  return q;
}

}  // namespace

void fp8_matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N, int C, int OC,
                        const Fp8Recipe& recipe) {
  if (!fp8_gemm_fits(N, OC, C, 2)) {
    // bf16 fallback: fp32 products of the bf16 values, one rounding to bf16.
    std::vector<float> o(size_t(N) * OC);
    const auto i = widened(inp, size_t(N) * C), w = widened(weight, size_t(OC) * C);
    const auto b = bias ? widened(bias, OC) : std::vector<float>();
    matmul_forward(o.data(), i.data(), w.data(), bias ? b.data() : nullptr, N, C, OC);
    for (size_t j = 0; j < o.size(); ++j) out[j] = float_to_bf16(o[j]);
    return;
  }
  const Quantized x = quantize(inp, N, C, recipe.forward, true, false);
  const Quantized w = quantize(weight, OC, C, recipe.forward, true, false);
  fp8_gemm(out, x.codes.data(), recipe.forward, x.scale_inv, w.codes.data(), recipe.forward, w.scale_inv, bias, N, OC,
           C, 1.0f);
}

void fp8_matmul_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                         const bf16* weight, int N, int C, int OC, const Fp8Recipe& recipe) {
  const bool dgrad_fp8 = dinp && fp8_gemm_fits(N, C, OC, 2);
  const bool wgrad_fp8 = dweight && fp8_gemm_fits(OC, C, N, 4);
  if ((dinp && !dgrad_fp8) || (dweight && !wgrad_fp8)) {
    // The GEMMs FP8 cannot take, in bf16 (the bias gradient is computed below).
    const auto d = widened(dout, size_t(N) * OC), i = widened(inp, size_t(N) * C), w = widened(weight, size_t(OC) * C);
    std::vector<float> di(dinp && !dgrad_fp8 ? size_t(N) * C : 0);
    matmul_backward(di.empty() ? nullptr : di.data(), dweight && !wgrad_fp8 ? dweight : nullptr, nullptr, d.data(),
                    i.data(), w.data(), N, C, OC);
    for (size_t j = 0; j < di.size(); ++j) dinp[j] = float_to_bf16(di[j]);
  }
  if (dgrad_fp8 || wgrad_fp8) {
    // dout [N,OC]: as stored for dinp (k = OC), transposed for dweight (k = N).
    const Quantized dy = quantize(dout, N, OC, recipe.backward, dgrad_fp8, wgrad_fp8);
    if (dgrad_fp8) {
      // dinp[N,C] = dout[N,OC] weight[OC,C]: B = weight^T [C,OC].
      const Quantized wt = quantize(weight, OC, C, recipe.forward, false, true);
      fp8_gemm(dinp, dy.codes.data(), recipe.backward, dy.scale_inv, wt.codes_t.data(), recipe.forward, wt.scale_inv,
               nullptr, N, C, OC, 1.0f);
    }
    if (wgrad_fp8) {
      // dweight[OC,C] += dout^T[OC,N] inp[N,C]: B = inp^T [C,N].
      const Quantized xt = quantize(inp, N, C, recipe.forward, false, true);
      fp8_gemm(dweight, dy.codes_t.data(), recipe.backward, dy.scale_inv, xt.codes_t.data(), recipe.forward,
               xt.scale_inv, OC, C, N, 1.0f, 1.0f);
    }
  }
  if (dweight && dbias) {
    // Column sums of the bf16 gradient (not quantised), as the bf16 path adds them.
    std::vector<float> acc(OC, 0.0f);
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < OC; ++o) acc[o] += bf16_to_float(dout[size_t(n) * OC + o]);
    for (int o = 0; o < OC; ++o) dbias[o] += acc[o];
  }
}

}  // namespace holmes::model::cpu
