// The linear layer with its GEMMs in FP8 on GemmRunner (the FP8 recipe, model/fp8_recipe.hpp),
// named and ordered like its CPU twin model/cpu/fp8_ops.hpp and like matmul.hpp:
//   forward  out[N,OC]  = q(inp) q(weight)^T + bias                     (bf16 out)
//   backward dinp[N,C]  = q(dout) q(weight^T)^T                          (written; null skips)
//            dweight[OC,C] += q(dout^T) q(inp^T)^T                       (fp32; null skips it and dbias)
//            dbias[OC] += column sums of dout (bf16 values, not quantised)
// q() casts a bf16 tensor to FP8 with the power-of-two scale of its own amax, measured on the
// device just before (current scaling): inp and weight in recipe.forward, dout in
// recipe.backward. The backward casts its inputs again from their bf16 values (the same amax,
// the same scale, the same bytes as the forward's casts), so the forward keeps no FP8 copy.
// The quantised operands live in stream-ordered scratch (scratch.hpp) for the call. A GEMM
// whose shape model::fp8_gemm_fits refuses, or that cuBLASLt has no FP8 algorithm for, runs
// as the bf16 GEMM of matmul.hpp instead; the return value counts the GEMMs that ran in FP8.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/gemm.hpp"
#include "cuda/pointwise.hpp"
#include "model/fp8_recipe.hpp"

namespace holmes::cuda {

int fp8_matmul_forward(GemmRunner& gemm, bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N,
                       int C, int OC, const model::Fp8Recipe& recipe, cudaStream_t stream = nullptr);

int fp8_matmul_backward(GemmRunner& gemm, bf16* dinp, float* dweight, float* dbias, const bf16* dout,
                        const bf16* inp, const bf16* weight, int N, int C, int OC, const model::Fp8Recipe& recipe,
                        cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
