#include "cuda/matmul_fp8.hpp"

#include "cuda/fp8_cast.hpp"
#include "cuda/matmul.hpp"
#include "cuda/scratch.hpp"

namespace holmes::cuda {

namespace {

DType dtype_of(model::Fp8Format f) { return f == model::Fp8Format::kE4M3 ? DType::kE4M3 : DType::kE5M2; }

// C[m,n] = A[m,k] B[n,k]^T with FP8 operands: the only layout Hopper's FP8 GEMMs take.
GemmShape fp8_shape(int m, int n, int k, model::Fp8Format a, model::Fp8Format b, DType c, bool bias) {
  GemmShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.trans_a = false;
  s.trans_b = true;
  s.ab_type = dtype_of(a);
  s.b_type = dtype_of(b);
  s.c_type = c;
  s.bias = bias;
  return s;
}

bool fits(const GemmShape& s) {
  return model::fp8_gemm_fits(s.m, s.n, s.k, static_cast<int>(dtype_bytes(s.c_type)));
}

}  // namespace

int fp8_matmul_forward(GemmRunner& gemm, bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N,
                       int C, int OC, const model::Fp8Recipe& recipe, cudaStream_t stream) {
  const GemmShape s = fp8_shape(N, OC, C, recipe.forward, recipe.forward, DType::kBf16, bias != nullptr);
  const std::size_t nx = static_cast<std::size_t>(N) * C, nw = static_cast<std::size_t>(OC) * C;
  if (fits(s)) {
    ScratchLayout layout;
    const std::size_t at_x = layout.add(nx), at_w = layout.add(nw), at_f = layout.add(4 * sizeof(float));
    StreamScratch scratch(layout.bytes(), stream);
    auto* xq = scratch.at<std::uint8_t>(at_x);
    auto* wq = scratch.at<std::uint8_t>(at_w);
    float* amax = scratch.at<float>(at_f);  // [amax x, amax w, 1/scale x, 1/scale w]
    if (gemm.supports(out, xq, wq, bias, nullptr, s)) {
      amax_forward(amax, inp, nx, stream);
      cast_to_fp8(xq, amax + 2, inp, nx, amax, recipe.forward, stream);
      amax_forward(amax + 1, weight, nw, stream);
      cast_to_fp8(wq, amax + 3, weight, nw, amax + 1, recipe.forward, stream);
      gemm.run_fp8(out, xq, wq, bias, GemmScales{amax + 2, amax + 3}, s, 1.0f, 0.0f, stream);
      scratch.release();
      return 1;
    }
    scratch.release();
  }
  matmul_forward(gemm, out, inp, weight, bias, N, C, OC, DType::kBf16, stream);
  return 0;
}

int fp8_matmul_backward(GemmRunner& gemm, bf16* dinp, float* dweight, float* dbias, const bf16* dout,
                        const bf16* inp, const bf16* weight, int N, int C, int OC, const model::Fp8Recipe& recipe,
                        cudaStream_t stream) {
  // dinp[N,C] = dout[N,OC] weight[OC,C]: B = weight^T [C,OC].
  const GemmShape sd = fp8_shape(N, C, OC, recipe.backward, recipe.forward, DType::kBf16, false);
  // dweight[OC,C] += dout^T[OC,N] inp[N,C]: A = dout^T [OC,N], B = inp^T [C,N].
  const GemmShape sw = fp8_shape(OC, C, N, recipe.backward, recipe.forward, DType::kF32, false);
  const std::size_t ny = static_cast<std::size_t>(N) * OC, nx = static_cast<std::size_t>(N) * C,
                    nw = static_cast<std::size_t>(OC) * C;
  bool run_d = dinp != nullptr && fits(sd), run_w = dweight != nullptr && fits(sw);
  ScratchLayout layout;
  const std::size_t at_dy = layout.add(run_d ? ny : 0), at_dyt = layout.add(run_w ? ny : 0);
  const std::size_t at_wt = layout.add(run_d ? nw : 0), at_xt = layout.add(run_w ? nx : 0);
  const std::size_t at_f = layout.add(6 * sizeof(float));
  StreamScratch scratch(run_d || run_w ? layout.bytes() : 0, stream);
  auto* dy = scratch.at<std::uint8_t>(at_dy);
  auto* dyt = scratch.at<std::uint8_t>(at_dyt);
  auto* wt = scratch.at<std::uint8_t>(at_wt);
  auto* xt = scratch.at<std::uint8_t>(at_xt);
  float* f = scratch.at<float>(at_f);  // [amax dout, amax w, amax x, 1/scale dout, w, x]
  run_d = run_d && gemm.supports(dinp, dy, wt, nullptr, nullptr, sd);
  run_w = run_w && gemm.supports(dweight, dyt, xt, nullptr, nullptr, sw);
  int ran = 0;
  if (run_d || run_w) {
    amax_forward(f, dout, ny, stream);
    cast_transpose_to_fp8(run_d ? dy : nullptr, run_w ? dyt : nullptr, f + 3, dout, N, OC, f, recipe.backward,
                          stream);
  }
  if (run_d) {
    amax_forward(f + 1, weight, nw, stream);
    cast_transpose_to_fp8(nullptr, wt, f + 4, weight, OC, C, f + 1, recipe.forward, stream);
    gemm.run_fp8(dinp, dy, wt, nullptr, GemmScales{f + 3, f + 4}, sd, 1.0f, 0.0f, stream);
    ++ran;
  } else if (dinp != nullptr) {
    matmul_backward(gemm, dinp, nullptr, nullptr, dout, inp, weight, N, C, OC, DType::kBf16, DType::kF32, stream);
  }
  if (run_w) {
    amax_forward(f + 2, inp, nx, stream);
    cast_transpose_to_fp8(nullptr, xt, f + 5, inp, N, C, f + 2, recipe.forward, stream);
    gemm.run_fp8(dweight, dyt, xt, nullptr, GemmScales{f + 3, f + 5}, sw, 1.0f, 1.0f, stream);
    ++ran;
  } else if (dweight != nullptr) {
    matmul_backward(gemm, nullptr, dweight, nullptr, dout, inp, weight, N, C, OC, DType::kBf16, DType::kF32, stream);
  }
  if (dweight != nullptr && dbias != nullptr) bias_backward(dbias, dout, N, OC, stream);
  scratch.release();
  return ran;
}

}  // namespace holmes::cuda
