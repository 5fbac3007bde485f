// The FP8 ops on the host: the CPU twins of cuda/fp8_cast.hpp (amax, casts) and of the
// cuBLASLt FP8 GEMM (cuda/gemm.hpp), and the linear layer built from them (the twin of
// cuda/matmul_fp8.hpp). They compute what the GPU computes: the same amax, the same power-of-
// two scale, the same bytes out of every cast (model/fp8.hpp's encoder is the GPU's
// cvt.rn.satfinite), and the GEMM's products exact in fp32 (two FP8 values have at most 8
// significant bits between them) summed in fp32, times the two inverse scales (exact), plus
// the bias, rounded once to the output type. Only the order of the fp32 sums differs from
// the GPU's. Shapes use the model's legend (N rows, C input channels, OC output channels).
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/bf16.hpp"
#include "model/fp8.hpp"
#include "model/fp8_recipe.hpp"

namespace holmes::model::cpu {

// amax (1) writes the largest |x| of x (n): the largest fp8_magnitude_bits, so a NaN wins;
// 0 for n == 0.
void amax_forward(float* amax, const bf16* x, size_t n);

// out (n) writes fp8_encode(inp * scale, f) with scale = fp8_scale(*amax, f); scale_inv (1;
// nullptr = skip) writes fp8_scale_inv(*amax, f), the factor that undoes it.
void cast_to_fp8(std::uint8_t* out, float* scale_inv, const bf16* inp, size_t n, const float* amax, Fp8Format f);

// The same cast of inp (rows, cols): out (rows, cols) as stored, out_t (cols, rows) its
// transpose; either may be nullptr. (Hopper's FP8 GEMMs read both operands with k
// contiguous, so the backward needs some inputs transposed.)
void cast_transpose_to_fp8(std::uint8_t* out, std::uint8_t* out_t, float* scale_inv, const bf16* inp, int rows,
                           int cols, const float* amax, Fp8Format f);

// out (n) writes bf16(fp8_decode(inp) * *scale_inv): exact (an FP8 value times a power of
// two is a bf16 value).
void cast_from_fp8(bf16* out, const std::uint8_t* inp, size_t n, const float* scale_inv, Fp8Format f);

// The FP8 GEMM: c[m,n] = alpha * a_scale_inv * b_scale_inv * (a[m,k] b[n,k]^T) + beta c
// (+ bias[n]), a and b FP8 codes (formats af, bf), both stored with k contiguous.
// bf16 c: beta 0 only (as the model uses it), bias optional; fp32 c: no bias, any beta (the
// weight gradient accumulates with beta 1).
void fp8_gemm(bf16* c, const std::uint8_t* a, Fp8Format af, float a_scale_inv, const std::uint8_t* b, Fp8Format bf,
              float b_scale_inv, const bf16* bias, int m, int n, int k, float alpha);
void fp8_gemm(float* c, const std::uint8_t* a, Fp8Format af, float a_scale_inv, const std::uint8_t* b, Fp8Format bf,
              float b_scale_inv, int m, int n, int k, float alpha, float beta);

// The linear layer with its three GEMMs in FP8 (model/kernels.hpp's matmul contract, bf16
// activations and weights, fp32 weight and bias gradients):
//   forward  out[N,OC]  = q(inp) q(weight)^T + bias               (forward format)
//   backward dinp[N,C]  = q(dout) q(weight^T)^T                    (dinp written; nullptr skips)
//            dweight   += q(dout^T) q(inp^T)^T                     (nullptr skips it and dbias)
//            dbias     += column sums of dout (bf16 values, not quantised)
// q() is the cast with the tensor's own current scale (inp and weight in recipe.forward,
// dout in recipe.backward); a GEMM whose shape fp8_gemm_fits() refuses runs in bf16 (fp32
// products of the bf16 values) instead, as the GPU does.
void fp8_matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N, int C, int OC,
                        const Fp8Recipe& recipe);
void fp8_matmul_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                         const bf16* weight, int N, int C, int OC, const Fp8Recipe& recipe);

}  // namespace holmes::model::cpu
