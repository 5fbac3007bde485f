// The FP8 recipe's element-wise ops on the GPU, named like their CPU twins in
// model/cpu/fp8_ops.hpp (outputs, inputs, sizes, stream): the amax of a bf16 tensor, the cast
// to FP8 with the power-of-two scale that amax gives (model/fp8.hpp), the same cast writing
// the transpose too (Hopper's FP8 GEMMs read both operands with k contiguous), and the cast
// back. The scale is computed on the device from the amax it measured, so nothing waits for
// the host; the casts write the inverse scale the GEMM multiplies by. All asynchronous on
// `stream`; launch failures throw CudaError. FP8 codes are bytes (uint8_t); formats as in
// model/fp8.hpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "model/fp8.hpp"

namespace holmes::cuda {

using bf16 = __nv_bfloat16;
using model::Fp8Format;

// amax (1, device) writes the largest |x| over x (n): the maximum of the magnitudes' bit
// patterns (model::fp8_magnitude_bits), so a NaN wins and the result is the same in any order
// (an integer atomicMax per block); 0 for n == 0. Any alignment.
void amax_forward(float* amax, const bf16* x, std::size_t n, cudaStream_t stream = nullptr);

// out (n) writes the FP8 code of inp * scale, scale = fp8_scale(*amax, f), rounded to nearest
// even and saturated to the largest finite value (__NV_SATFINITE); scale_inv (1; may be null)
// writes fp8_scale_inv(*amax, f). amax is device memory (amax_forward's output). Any alignment.
void cast_to_fp8(std::uint8_t* out, float* scale_inv, const bf16* inp, std::size_t n, const float* amax,
                 Fp8Format f, cudaStream_t stream = nullptr);

// The same cast of inp (rows, cols): out (rows, cols) as stored and out_t (cols, rows) its
// transpose, either may be null (not both). 32 x 32 tiles through shared memory.
void cast_transpose_to_fp8(std::uint8_t* out, std::uint8_t* out_t, float* scale_inv, const bf16* inp, int rows,
                           int cols, const float* amax, Fp8Format f, cudaStream_t stream = nullptr);

// out (n) writes bf16(decode(inp) * *scale_inv) (exact). Any alignment.
void cast_from_fp8(bf16* out, const std::uint8_t* inp, std::size_t n, const float* scale_inv, Fp8Format f,
                   cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
