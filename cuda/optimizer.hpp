// The optimizer's ops and the small reductions of model/kernels.hpp on the GPU, fp32 data:
// the same names, argument order and write/accumulate contract as the CPU twins in
// model/cpu/optimizer.cpp. Asynchronous on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "model/kernels.hpp"

namespace holmes::cuda {

// params, m, v (n) update in place (model::Kernels::adamw_update).
void adamw_update(float* params, float* m, float* v, const float* grads, std::size_t n, const model::AdamWStep& s,
                  cudaStream_t stream = nullptr);
// sq (1, double, device) accumulates the sum of squares of x (n), summed in double.
// Deterministic (no atomics): sum_squares_blocks(n) block partials in stream-ordered scratch
// (scratch.hpp), added in a fixed order by one block; the same n and x give the same bits.
void sum_squares_forward(double* sq, const float* x, std::size_t n, cudaStream_t stream = nullptr);
// Blocks of the sum of squares' first stage: one per 4096 elements, 1 to 1024. A function of
// n alone, so the summation order is too (host arithmetic, exposed for tests).
int sum_squares_blocks(std::size_t n);
// mean (1, device) writes the mean of x (N), summed in double.
void mean_forward(float* mean, const float* x, int N, cudaStream_t stream = nullptr);
// x (n) *= s.
void scale_forward(float* x, float s, std::size_t n, cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
