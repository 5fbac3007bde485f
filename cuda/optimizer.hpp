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
void sum_squares_forward(double* sq, const float* x, std::size_t n, cudaStream_t stream = nullptr);
// mean (1, device) writes the mean of x (N), summed in double.
void mean_forward(float* mean, const float* x, int N, cudaStream_t stream = nullptr);
// x (n) *= s.
void scale_forward(float* x, float s, std::size_t n, cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
